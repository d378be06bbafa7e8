// Small statistics on samples (timings, ratios): one definition of the
// median for the project.
#pragma once
#include <algorithm>
#include <vector>

namespace crucible {

// The middle value, the mean of the two middle ones for an even count; 0
// for no samples.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace crucible
