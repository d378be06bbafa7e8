// StopSignals: SIGINT/SIGTERM for the lifetime of a training run. The first
// signal of either kind asks for a checkpoint at the next step boundary
// (pending() turns non-zero); both signals go back to their default action at
// once, and the other is blocked while the handler runs, so a second signal of
// either kind always kills. The previous handlers are restored on
// destruction. One object at a time per process.
#pragma once
#include <csignal>

namespace crucible::runtime {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The signal received (0: none yet).
  int pending() const;

 private:
  struct sigaction old_int_ {}, old_term_{};
};

}  // namespace crucible::runtime
