// StopSignals: SIGINT/SIGTERM/SIGUSR1 (Slurm's warning before preemption,
// `--signal=USR1@T`) for the lifetime of a training run. The first
// signal of any of them asks for a checkpoint at the next step boundary
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
  struct sigaction old_[3] = {};
};

// The supervisor's signals (runtime/supervisor.h), for the lifetime of a
// supervised job: SIGINT, SIGTERM and SIGUSR1 ask for a stop (the ranks
// checkpoint and exit; a second one kills them), SIGHUP asks a job that
// shrank to grow back. The handlers only count; the supervisor's loop acts.
class SupervisorSignals {
 public:
  SupervisorSignals();
  ~SupervisorSignals();
  SupervisorSignals(const SupervisorSignals&) = delete;
  SupervisorSignals& operator=(const SupervisorSignals&) = delete;
  static int stops();  // stop signals received so far
  static int grows();  // SIGHUPs received so far

 private:
  struct sigaction old_[4] = {};
};

}  // namespace crucible::runtime
