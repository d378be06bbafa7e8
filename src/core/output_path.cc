#include "core/output_path.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace crucible {

namespace {

namespace fs = std::filesystem;

std::string shown(const std::string& path) { return path.empty() ? "''" : path; }

// What a non-regular file is, for the message ("" for a regular file).
std::string kind_of(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return "";
  if (S_ISDIR(st.st_mode)) return "is a directory";
  if (S_ISCHR(st.st_mode)) return "is a character device";
  if (S_ISBLK(st.st_mode)) return "is a block device";
  if (S_ISFIFO(st.st_mode)) return "is a FIFO";
  if (S_ISSOCK(st.st_mode)) return "is a socket";
  if (S_ISLNK(st.st_mode))
    return "is a symbolic link (crucible replaces the file it is given, not what a link points to; "
           "name the "
           "file itself)";
  return "is not a regular file";
}

bool is_file(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The checkpoint directory of a run that `dir` (an existing directory) is
// inside of or is, or "" when none: an ancestor named `ckpt` beside a
// config.toml (a run directory's), or holding the `latest` file the
// checkpoint writer keeps.
std::string enclosing_checkpoint_dir(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::canonical(dir, ec);
  if (ec) return "";
  for (;; p = p.parent_path()) {
    if (p.filename() == "ckpt" &&
        (is_file(p.parent_path() / "config.toml") || is_file(p / "latest")))
      return p.string();
    if (p == p.parent_path()) return "";
  }
}

Status outside_checkpoints(const std::string& path, const std::string& what,
                           const std::string& dir) {
  const std::string ckpt = enclosing_checkpoint_dir(dir);
  if (ckpt.empty()) return Status::ok();
  return Status::invalid(
      what + " " + path + ": is inside the checkpoint directory " + ckpt +
      " of a run (writing there would change a checkpoint); choose a path outside it");
}

// The directory a target is created in: it exists and is a directory, and
// (outside the checkpoint writer) is not inside a checkpoint directory.
Status check_parent(const std::string& path, const std::string& what, OutputScope scope) {
  const fs::path parent = fs::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    return Status::invalid(
        what + " " + path + ": its directory " + dir +
        (err == ENOENT ? " does not exist" : ": " + std::string(std::strerror(err))));
  }
  if (!S_ISDIR(st.st_mode))
    return Status::invalid(what + " " + path + ": " + dir + " is not a directory");
  if (scope == OutputScope::kCheckpoint) return Status::ok();
  return outside_checkpoints(path, what, dir);
}

}  // namespace

Status check_output_path(const std::string& path, const std::string& what, OutputScope scope) {
  if (path.empty() || path.back() == '/' || fs::path(path).filename() == "." ||
      fs::path(path).filename() == "..")
    return Status::invalid(what + " " + shown(path) + ": not a file name");
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    const std::string kind = kind_of(st);
    if (!kind.empty())
      return Status::invalid(what + " " + path + ": " + kind +
                             "; crucible writes only regular files");
  } else if (errno != ENOENT && errno != ENOTDIR) {  // ENOTDIR: check_parent names the culprit
    return Status::invalid(what + " " + path + ": " + std::strerror(errno));
  }
  return check_parent(path, what, scope);
}

Status check_output_dir(const std::string& path, const std::string& what) {
  if (path.empty()) return Status::invalid(what + " '': not a directory name");
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  struct stat st {};
  if (::lstat(trimmed.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return Status::invalid(what + " " + path + ": " + kind_of(st) +
                             "; the output must be a directory");
    return outside_checkpoints(path, what, trimmed);
  }
  if (errno != ENOENT && errno != ENOTDIR)
    return Status::invalid(what + " " + path + ": " + std::strerror(errno));
  // Absent: created with its missing parents, so the nearest existing
  // ancestor must be a directory (outside any checkpoint directory).
  fs::path up = fs::path(trimmed).parent_path();
  for (; !up.empty() && ::stat(up.c_str(), &st) != 0; up = up.parent_path()) {
  }
  const std::string ancestor = up.empty() ? "." : up.string();
  if (::stat(ancestor.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::invalid(what + " " + path + ": " + ancestor + " is not a directory");
  return outside_checkpoints(path, what, ancestor);
}

}  // namespace crucible
