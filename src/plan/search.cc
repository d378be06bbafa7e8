#include "plan/search.h"

#include <algorithm>

namespace crucible::plan {

namespace {

std::vector<int> divisors(int64_t n, int64_t limit) {
  std::vector<int> d;
  for (int64_t i = 1; i <= std::min(n, limit); ++i)
    if (n % i == 0) d.push_back(int(i));
  return d;
}

// "does not fit: ..." -> "does not fit"; "[layout] dist.pp: ..." -> that key.
std::string reason_kind(const std::string& why) {
  if (why.rfind("does not fit", 0) == 0) return "does not fit";
  const size_t colon = why.find(':');
  return colon == std::string::npos ? why : why.substr(0, colon);
}

}  // namespace

Result<SearchResult> search(const nn::GPTConfig& md, const Cluster& cl, const SearchOptions& o) {
  if (o.devices < 1) return Status::invalid("[plan] --devices must be >= 1");
  if (o.devices > cl.devices())
    return Status::invalid("[plan] --devices " + std::to_string(o.devices) + ": the cluster " + cl.name + " has " +
                           std::to_string(cl.devices()) + " devices");
  if (o.global_batch < 1) return Status::invalid("[plan] --global-batch must be >= 1");
  SearchResult r;
  std::vector<Prediction> all;
  auto consider = [&](const Prediction& p) {
    if (!p.runs) {
      ++r.rejected[reason_kind(p.why_not)];
      return false;
    }
    ++r.evaluated;
    all.push_back(p);
    return true;
  };
  for (int tp : divisors(md.n_head, cl.devices_per_node)) {
    if (o.devices % tp || (4 * md.n_embd) % tp) continue;
    for (int pp : divisors(o.devices / tp, md.n_layer)) {
      if (md.n_layer % pp) continue;
      const int dp = o.devices / (tp * pp);
      if (o.global_batch % dp) {
        ++r.rejected["global batch does not divide by dp"];
        continue;
      }
      const int64_t per_dp = o.global_batch / dp;
      std::vector<std::string> schedules = {"1f1b"};
      if (pp > 1) schedules = {"1f1b", "interleaved", "zb-h1"};
      for (const std::string& sched : schedules)
        for (int v : sched == "interleaved" ? std::vector<int>{2, 4} : std::vector<int>{1}) {
          if (md.n_layer % (pp * v)) continue;
          for (int mb : divisors(per_dp, o.max_micro_batch)) {
            if (per_dp / mb > kMaxMicroBatches) {
              ++r.rejected["more micro-batches per step than the planner's limit"];
              continue;
            }
            const int m = int(per_dp / mb);
            if (pp > 1 && (m < pp || (sched == "interleaved" && m % pp))) {
              ++r.rejected["too few micro-batches for the pipeline"];
              continue;
            }
            for (const std::string& prec : o.precisions)
              for (bool sp : tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
                for (int zero : dp > 1 ? std::vector<int>{0, 1, 2} : std::vector<int>{0}) {
                  // From the cheapest memory saving up: the fused head (the
                  // same FLOPs), then each recompute policy without and
                  // with it; the first that fits ends it.
                  bool fits = false;
                  for (const char* rc : {"none", "selective", "full"})
                    for (bool fused : {false, true}) {
                      if (fits) break;
                      Candidate c;
                      c.dp = dp, c.tp = tp, c.pp = pp, c.v = v, c.mb = mb, c.m = m, c.zero = zero, c.sp = sp;
                      c.schedule = sched, c.precision = prec, c.recompute = rc, c.fused_head = fused;
                      fits = consider(predict(md, c, cl));
                    }
                }
              }
          }
        }
    }
  }
  std::sort(all.begin(), all.end(), [](const Prediction& a, const Prediction& b) {
    return a.step_time_s < b.step_time_s;
  });
  if (all.size() > size_t(std::max(1, o.top))) all.resize(size_t(std::max(1, o.top)));
  r.best = std::move(all);
  return r;
}

}  // namespace crucible::plan
