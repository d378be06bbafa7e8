#include "core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace crucible {

std::string errno_str() { return std::strerror(errno); }

Result<size_t> pread_full(int fd, void* dst, size_t n, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(dst);
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, p + got, n - got, off_t(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::io("cannot read " + path + ": " + errno_str());
    if (r == 0) break;
    got += size_t(r);
  }
  return got;
}

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

Status fsync_dir(const std::string& dir) {
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Status::io("[io] cannot open directory " + dir + ": " + errno_str());
  int rc = ::fsync(dfd);
  std::string err = rc != 0 ? errno_str() : "";
  ::close(dfd);
  if (rc != 0) return Status::io("[io] fsync failed on directory " + dir + ": " + err);
  return Status::ok();
}

AtomicFile::~AtomicFile() { abandon(); }

Status AtomicFile::open(const std::string& path, OutputScope scope) {
  abandon();
  CRUCIBLE_RETURN_IF_ERROR(check_output_path(path, "[io]", scope));
  // Unique per process and per file object: ranks or threads writing the
  // same target never share a temporary.
  static std::atomic<uint64_t> counter{0};
  path_ = path;
  // O_EXCL | O_NOFOLLOW: the temporary is a new file, never something that
  // already sits under its name (a link planted there is not followed; a
  // crashed process's leftover of the same pid is skipped, not reused).
  for (int attempt = 0;; ++attempt) {
    tmp_ = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ >= 0) break;
    if (errno == EEXIST && attempt < 64) continue;
    Status s = Status::io("[io] cannot create " + tmp_ + ": " + errno_str());
    tmp_.clear();  // not ours: abandon() must not unlink it
    return s;
  }
  return Status::ok();
}

Status AtomicFile::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::io("[io] writing " + path_ + ": " + errno_str());
    }
    p += w;
    n -= size_t(w);
  }
  return Status::ok();
}

Status AtomicFile::pwrite(const void* data, size_t n, size_t offset) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::pwrite(fd_, p, n, off_t(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::io("[io] writing " + path_ + ": " + errno_str());
    }
    p += w;
    n -= size_t(w);
    offset += size_t(w);
  }
  return Status::ok();
}

Status AtomicFile::commit() {
  if (::fsync(fd_) != 0) return Status::io("[io] fsync failed on " + path_ + ": " + errno_str());
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return Status::io("[io] close failed on " + path_ + ": " + errno_str());
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    return Status::io("[io] cannot rename " + tmp_ + " to " + path_ + ": " + errno_str());
  tmp_.clear();
  return fsync_dir(dir_of(path_));
}

void AtomicFile::abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
}

Status write_file_atomic(const std::string& path, const std::vector<const void*>& parts,
                         const std::vector<size_t>& sizes, OutputScope scope) {
  AtomicFile f;
  CRUCIBLE_RETURN_IF_ERROR(f.open(path, scope));
  for (size_t i = 0; i < parts.size(); ++i) CRUCIBLE_RETURN_IF_ERROR(f.write(parts[i], sizes[i]));
  return f.commit();
}

Status write_file_atomic(const std::string& path, const std::string& text, OutputScope scope) {
  return write_file_atomic(path, {text.data()}, {text.size()}, scope);
}

Result<std::string> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::invalid("cannot read " + path + ": " + errno_str());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::invalid("cannot read " + path + ": not a regular file");
  }
  std::string out(size_t(st.st_size), '\0');
  auto got = pread_full(fd, out.data(), out.size(), 0, path);
  ::close(fd);
  if (!got) return got.status();
  out.resize(*got);
  return out;
}

}  // namespace crucible
