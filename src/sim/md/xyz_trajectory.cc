#include "sim/md/xyz_trajectory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "core/file_io.h"
#include "core/output_path.h"

namespace crucible::sim::md {

XyzTrajectory::~XyzTrajectory() {
  if (fd_ >= 0) ::close(fd_);
}

Status XyzTrajectory::open(const std::string& path, uint64_t keep_bytes) {
  CRUCIBLE_RETURN_IF_ERROR(check_output_path(path, "[sim] md trajectory"));
  path_ = path;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return Status::io("[sim] md: cannot open " + path + ": " + errno_str());
  struct stat st {};
  if (::fstat(fd_, &st) != 0)
    return Status::io("[sim] md: cannot stat " + path + ": " + errno_str());
  if (uint64_t(st.st_size) < keep_bytes)
    return Status::corrupt("[sim] md: trajectory " + path + " holds " + std::to_string(st.st_size) +
                           " bytes, the checkpoint recorded " + std::to_string(keep_bytes));
  if (::ftruncate(fd_, off_t(keep_bytes)) != 0)
    return Status::io("[sim] md: cannot cut " + path + " back: " + errno_str());
  bytes_ = keep_bytes;
  return Status::ok();
}

std::string xyz_frame(const std::vector<double>& pos, double box, int64_t step, double time) {
  const size_t n = pos.size() / 3;
  std::string s;
  s.reserve(64 * n + 256);
  char line[160];
  std::snprintf(line, sizeof line, "%zu\n", n);
  s += line;
  std::snprintf(
      line, sizeof line,
      "Lattice=\"%.10g 0 0 0 %.10g 0 0 0 %.10g\" Properties=species:S:1:pos:R:3 pbc=\"T T T\" "
      "step=%lld time=%.6g\n",
      box, box, box, static_cast<long long>(step), time);
  s += line;
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(line, sizeof line, "Ar %.6f %.6f %.6f\n", pos[3 * i], pos[3 * i + 1],
                  pos[3 * i + 2]);
    s += line;
  }
  return s;
}

Status XyzTrajectory::append(const std::vector<double>& pos, double box, int64_t step,
                             double time) {
  const std::string s = xyz_frame(pos, box, step, time);
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t w = ::pwrite(fd_, s.data() + done, s.size() - done, off_t(bytes_ + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::io("[sim] md: cannot write " + path_ + ": " + errno_str());
    }
    done += size_t(w);
  }
  bytes_ += s.size();
  return Status::ok();
}

Status XyzTrajectory::sync() {
  if (fd_ >= 0 && ::fdatasync(fd_) != 0)
    return Status::io("[sim] md: cannot sync " + path_ + ": " + errno_str());
  return Status::ok();
}

}  // namespace crucible::sim::md
