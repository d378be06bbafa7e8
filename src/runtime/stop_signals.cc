#include "runtime/stop_signals.h"

namespace crucible::runtime {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
// The first SIGINT or SIGTERM asks for a stop; both go back to their default
// action at once, so a second one of either kind kills.
extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
  ::signal(SIGINT, SIG_DFL);  // async-signal-safe (POSIX.1-2008)
  ::signal(SIGTERM, SIG_DFL);
}

}  // namespace

StopSignals::StopSignals() {
  g_stop_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  // The other stop signal waits while the handler runs: it then meets the
  // default action the handler restored, instead of the handler again.
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

int StopSignals::pending() const { return g_stop_signal; }

}  // namespace crucible::runtime
