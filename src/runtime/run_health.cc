#include "runtime/run_health.h"

#include <algorithm>

#include "core/allocator.h"

namespace crucible::runtime {

void RunHealth::record_step(const StepMetrics& m) {
  phases_.push_back(
      {m.step_ms, m.data_wait_ms, m.forward_ms, m.backward_ms, m.optimizer_ms, m.comm_ms});
  in_use_.push_back(double(m.mem_in_use));
  comm_bytes_.push_back(m.comm_bytes);
  const size_t n = in_use_.size();
  for (auto& [site, bytes] : Allocator::global().live_by_tag()) {
    auto& series = by_site_[site];
    series.resize(n - 1, 0.0);  // a site that appeared late was at 0 before
    series.push_back(double(bytes));
  }
  for (auto& [site, series] : by_site_) series.resize(n, 0.0);  // sites gone this step
}

Result<std::vector<std::string>> RunHealth::finish(comm::Comm& comm,
                                                  double expected_comm_bytes) const {
  std::vector<std::string> out;
  if (expected_comm_bytes > 0 && !comm_bytes_.empty()) {
    std::vector<double> sorted = comm_bytes_;
    std::nth_element(sorted.begin(), sorted.begin() + long(sorted.size() / 2), sorted.end());
    const profile::CommVolumeCheck c =
        profile::check_comm_volume(sorted[sorted.size() / 2], expected_comm_bytes);
    if (!c.ok) out.push_back("[dist] warning: " + c.warning);
  }
  const profile::LeakVerdict leak = profile::detect_leak(in_use_);
  if (leak.leaking) {
    std::string sites;
    for (const auto& s : profile::detect_leaks_by_site(by_site_))
      sites += (sites.empty() ? "" : ", ") + s.site;
    out.push_back("[mem] warning: " + leak.message +
                  (sites.empty() ? "" : " (growing allocation sites: " + sites + ")"));
  }
  if (comm.size() > 1) {
    // Every rank ran the same steps; exchange them whole.
    const size_t per = phases_.size() * 6;
    std::vector<double> mine(per), all(per * size_t(comm.size()));
    for (size_t i = 0; i < phases_.size(); ++i) {
      const profile::PhaseTimes& p = phases_[i];
      double v[6] = {p.step_ms, p.data_wait_ms, p.forward_ms, p.backward_ms, p.optimizer_ms, p.comm_ms};
      std::copy(v, v + 6, mine.begin() + long(i * 6));
    }
    CRUCIBLE_RETURN_IF_ERROR(comm.allgather_bytes(mine.data(), per * sizeof(double), all.data()));
    std::vector<std::vector<profile::PhaseTimes>> per_rank(size_t(comm.size()));
    for (int r = 0; r < comm.size(); ++r)
      for (size_t i = 0; i < phases_.size(); ++i) {
        const double* v = &all[size_t(r) * per + i * 6];
        per_rank[size_t(r)].push_back({v[0], v[1], v[2], v[3], v[4], v[5]});
      }
    const profile::StragglerReport s = profile::detect_stragglers(per_rank);
    if (!s.stragglers.empty()) out.push_back("[dist] warning: " + s.message);
  }
  return out;
}

}  // namespace crucible::runtime
