#include "core/threads.h"

#include <omp.h>

#include <thread>

namespace crucible {

int hardware_threads() {
  int n = int(std::thread::hardware_concurrency());
  return n > 0 ? n : 1;
}

void set_num_threads(int n) {
  if (n <= 0) n = hardware_threads();
  omp_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace crucible
