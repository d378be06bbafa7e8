#include "runtime/restart_policy.h"

#include <algorithm>
#include <cmath>

namespace crucible::runtime {

double restart_backoff_s(int restart, double base) {
  return std::min(60.0, base * std::pow(2.0, std::max(0, restart - 1)));
}

int shrunk_world(int total, int min_ranks, int cap, bool reproducible) {
  auto pow2 = [](int x) { return x > 0 && (x & (x - 1)) == 0; };
  for (int w = cap; w >= std::max(1, min_ranks); --w) {
    if (total % w != 0) continue;
    if (reproducible && (!pow2(w) || !pow2(total / w))) continue;
    return w;
  }
  return 0;
}

}  // namespace crucible::runtime
