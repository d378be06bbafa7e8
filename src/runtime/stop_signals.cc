#include "runtime/stop_signals.h"

namespace crucible::runtime {

namespace {

constexpr int kStops[] = {SIGINT, SIGTERM, SIGUSR1};

volatile std::sig_atomic_t g_stop_signal = 0;
// The first stop signal asks for a stop; all go back to their default
// action at once, so a second one of any kind kills.
extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
  for (int s : kStops) ::signal(s, SIG_DFL);  // async-signal-safe (POSIX.1-2008)
}

volatile std::sig_atomic_t g_supervisor_stops = 0, g_supervisor_grows = 0;
extern "C" void on_supervisor_stop(int) { g_supervisor_stops = g_supervisor_stops + 1; }
extern "C" void on_supervisor_grow(int) { g_supervisor_grows = g_supervisor_grows + 1; }
constexpr int kSupervisorSignals[] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP};

}  // namespace

StopSignals::StopSignals() {
  g_stop_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  // The other stop signal waits while the handler runs: it then meets the
  // default action the handler restored, instead of the handler again.
  sigemptyset(&sa.sa_mask);
  for (int s : kStops) sigaddset(&sa.sa_mask, s);
  sa.sa_flags = SA_RESETHAND;
  for (int i = 0; i < 3; ++i) sigaction(kStops[i], &sa, &old_[i]);
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 3; ++i) sigaction(kStops[i], &old_[i], nullptr);
}

int StopSignals::pending() const { return g_stop_signal; }

SupervisorSignals::SupervisorSignals() {
  g_supervisor_stops = 0;
  g_supervisor_grows = 0;
  for (int i = 0; i < 4; ++i) {
    struct sigaction sa {};
    sa.sa_handler = kSupervisorSignals[i] == SIGHUP ? on_supervisor_grow : on_supervisor_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(kSupervisorSignals[i], &sa, &old_[i]);
  }
}

SupervisorSignals::~SupervisorSignals() {
  for (int i = 0; i < 4; ++i) sigaction(kSupervisorSignals[i], &old_[i], nullptr);
}

int SupervisorSignals::stops() { return g_supervisor_stops; }
int SupervisorSignals::grows() { return g_supervisor_grows; }

}  // namespace crucible::runtime
