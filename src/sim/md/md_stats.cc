#include "sim/md/md_stats.h"

#include <algorithm>
#include <cmath>

namespace crucible::sim::md {

BlockMean block_mean(const std::vector<double>& v, int blocks) {
  BlockMean out;
  const int n = int(v.size());
  blocks = std::min(blocks, n);
  if (blocks < 1) return out;
  const int len = n / blocks;
  std::vector<double> means(blocks, 0.0);
  for (int b = 0; b < blocks; ++b) {
    for (int i = 0; i < len; ++i) means[b] += v[size_t(b) * len + i];
    means[b] /= len;
  }
  for (double m : means) out.mean += m;
  out.mean /= blocks;
  out.blocks = blocks;
  if (blocks >= 2) {
    double ss = 0;
    for (double m : means) ss += (m - out.mean) * (m - out.mean);
    out.se = std::sqrt(ss / (blocks - 1) / blocks);
  }
  return out;
}

double slope(const std::vector<double>& t, const std::vector<double>& y) {
  const size_t n = std::min(t.size(), y.size());
  if (n < 2) return 0;
  double mt = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mt += t[i], my += y[i];
  mt /= n, my /= n;
  double stt = 0, sty = 0;
  for (size_t i = 0; i < n; ++i) stt += (t[i] - mt) * (t[i] - mt), sty += (t[i] - mt) * (y[i] - my);
  return stt > 0 ? sty / stt : 0;
}

}  // namespace crucible::sim::md
