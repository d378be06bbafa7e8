// md::ExactSum: a sum of doubles that does not depend on the order of its
// terms -- each term is rounded to a multiple of 2^-40 and added as a 128-bit
// integer, so the reproducible mode's energies, virial and kinetic energy are
// the same bits on any number of ranks and threads. Terms are per-atom values
// (|v| < 2^22 epsilon: beyond that the system has blown up, and ok() says so).
// Resolution 1e-12 per term. Value type; not thread-safe.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "core/status.h"

namespace crucible::sim::md {

class ExactSum {
 public:
  static constexpr double kScale = 1099511627776.0;  // 2^40
  static constexpr double kMaxTerm = 4194304.0;      // 2^22: |term| * 2^40 stays below 2^62
  void add(double v) {
    if (!(std::fabs(v) < kMaxTerm)) {
      bad_ = true;
      return;
    }
    acc_ += static_cast<__int128>(std::llround(v * kScale));
  }
  bool ok() const { return !bad_; }
  double value() const { return bad_ ? NAN : double(acc_) / kScale; }
  // Collective: the sum over every rank's terms (exact; order-free).
  Status allreduce(comm::Comm& comm) {
    if (comm.size() == 1) return Status::ok();
    struct Wire {
      __int128 acc;
      int64_t bad;
      int64_t pad;
    } mine{acc_, bad_ ? 1 : 0, 0};
    std::vector<Wire> all(comm.size());
    CRUCIBLE_RETURN_IF_ERROR(comm.allgather_bytes(&mine, sizeof mine, all.data()));
    acc_ = 0, bad_ = false;
    for (const Wire& w : all) acc_ += w.acc, bad_ = bad_ || w.bad;
    return Status::ok();
  }

 private:
  __int128 acc_ = 0;
  bool bad_ = false;
};

}  // namespace crucible::sim::md
