#include "core/threads.h"

#include <pthread.h>

#include <csignal>

#include <omp.h>

#include <cstdlib>
#include <thread>

namespace crucible {

int hardware_threads() {
  int n = int(std::thread::hardware_concurrency());
  return n > 0 ? n : 1;
}

void set_num_threads(int n) {
  // "All cores" defers to OMP_NUM_THREADS when a launcher set it (crucible
  // launch gives each of several ranks on one machine its share of the cores).
  if (n <= 0) {
    const char* env = std::getenv("OMP_NUM_THREADS");
    n = env ? std::atoi(env) : 0;
  }
  if (n <= 0) n = hardware_threads();
  omp_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

void block_stop_signals_in_this_thread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

}  // namespace crucible
