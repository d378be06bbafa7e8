// md::XyzTrajectory: the run's trajectory, RUN/md_traj.xyz, in extended XYZ
// (one frame: the atom count, a comment line with Lattice="L 0 0 0 L 0 0 0 L",
// Properties=species:S:1:pos:R:3, pbc and the step, then one "Ar x y z" line
// per atom in id order) -- read by OVITO, ASE and VMD. Frames are appended by
// rank 0; bytes() is what a checkpoint records, and a resumed run opens the
// file cut back to that many bytes, so its frames are those of an
// uninterrupted run. sync() makes what was written durable (called before a
// checkpoint records bytes()). Not thread-safe.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace crucible::sim::md {

// One extended-XYZ frame of wrapped positions pos: (N, 3) in id order.
std::string xyz_frame(const std::vector<double>& pos, double box, int64_t step, double time);

class XyzTrajectory {
 public:
  XyzTrajectory() = default;
  ~XyzTrajectory();
  XyzTrajectory(const XyzTrajectory&) = delete;
  XyzTrajectory& operator=(const XyzTrajectory&) = delete;

  // keep_bytes == 0: a new, empty file. Otherwise the file must hold at least
  // keep_bytes (else Status::corrupt naming it) and is cut back to them.
  Status open(const std::string& path, uint64_t keep_bytes);
  // One frame; pos: (N, 3) wrapped positions in id order.
  Status append(const std::vector<double>& pos, double box, int64_t step, double time);
  Status sync();
  uint64_t bytes() const { return bytes_; }
  bool is_open() const { return fd_ >= 0; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
};

}  // namespace crucible::sim::md
