#include "sim/md/md_stats.h"

#include <algorithm>
#include <cmath>

#include "sim/md/lj_eos.h"

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

nlohmann::json nve_summary(const std::vector<double>& samples, double density) {
  std::vector<double> t, T, P, U, E;
  for (size_t k = 0; k + kSampleWidth <= samples.size(); k += kSampleWidth) {
    t.push_back(samples[k]), T.push_back(samples[k + 1]), P.push_back(samples[k + 2]);
    U.push_back(samples[k + 3]), E.push_back(samples[k + 4]);
  }
  constexpr int kBlocks = 10;
  const BlockMean bT = block_mean(T, kBlocks), bP = block_mean(P, kBlocks),
                  bU = block_mean(U, kBlocks);
  // The EOS at the run's mean temperature; its uncertainty through se_T
  // (central differences in T) joins the sampling error of the mean.
  LjEosPoint eos, up, down;
  const double hT = 1e-4;
  if (!T.empty()) {
    eos = jzg_eos(density, bT.mean);
    up = jzg_eos(density, bT.mean + hT), down = jzg_eos(density, bT.mean - hT);
  }
  const double dPdT = (up.pressure - down.pressure) / (2 * hT),
               dUdT = (up.energy - down.energy) / (2 * hT);
  const double sigma_P = std::hypot(bP.se, dPdT * bT.se), sigma_U = std::hypot(bU.se, dUdT * bT.se);
  double max_dev = 0;
  for (double e : E) max_dev = std::max(max_dev, std::fabs(e - E.front()));
  return {{"nve_samples", int64_t(T.size())},
          {"temperature_mean", bT.mean},
          {"temperature_se", bT.se},
          {"pressure_mean", bP.mean},
          {"pressure_se", bP.se},
          {"pe_per_atom_mean", bU.mean},
          {"pe_per_atom_se", bU.se},
          {"eos_reference",
           "Johnson, Zollweg & Gubbins, Mol. Phys. 78, 591 (1993), MBWR at (rho, T_mean)"},
          {"eos_pressure", eos.pressure},
          {"eos_pe_per_atom", eos.energy},
          {"pressure_minus_eos", bP.mean - eos.pressure},
          {"pressure_sigma", sigma_P},
          {"pe_per_atom_minus_eos", bU.mean - eos.energy},
          {"pe_per_atom_sigma", sigma_U},
          {"energy_drift_per_atom_per_step", slope(t, E)},
          {"energy_max_deviation_per_atom", max_dev}};
}
}  // namespace crucible::sim::md
