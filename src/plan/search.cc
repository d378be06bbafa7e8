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

// The values a field ranges over: the fixed one alone, else `searched`.
template <typename T>
std::vector<T> over(const std::optional<T>& fixed, std::vector<T> searched) {
  return fixed ? std::vector<T>{*fixed} : searched;
}

}  // namespace

LayoutConstraints LayoutConstraints::from(const ParsedLayout& p) {
  LayoutConstraints k;
  const Candidate& c = p.c;
  if (p.has("dp")) k.dp = c.dp;
  if (p.has("tp")) k.tp = c.tp;
  if (p.has("pp")) k.pp = c.pp;
  if (p.has("v")) k.v = c.v;
  if (p.has("mb")) k.mb = c.mb;
  if (p.has("m")) k.m = c.m;
  if (p.has("zero")) k.zero = c.zero;
  if (p.has("sp")) k.sp = c.sp;
  if (p.has("fused_head")) k.fused_head = c.fused_head;
  if (p.has("schedule")) k.schedule = c.schedule;
  if (p.has("recompute")) k.recompute = c.recompute;
  if (p.has("precision")) k.precision = c.precision;
  return k;
}

bool LayoutConstraints::matches(const Candidate& c) const {
  auto ok = [](const auto& fixed, const auto& value) { return !fixed || *fixed == value; };
  return ok(dp, c.dp) && ok(tp, c.tp) && ok(pp, c.pp) && ok(v, c.v) && ok(mb, c.mb) && ok(m, c.m) &&
         ok(zero, c.zero) && ok(sp, c.sp) && ok(fused_head, c.fused_head) &&
         ok(schedule, c.schedule) && ok(recompute, c.recompute) && ok(precision, c.precision);
}

Result<SearchResult> search(const nn::GPTConfig& md, const Cluster& cl, const SearchOptions& o) {
  const LayoutConstraints& fx = o.fixed;
  if (o.devices < 1) return Status::invalid("[plan] --devices must be >= 1");
  if (o.devices > cl.devices())
    return Status::invalid("[plan] --devices " + std::to_string(o.devices) + ": the cluster " + cl.name + " has " +
                           std::to_string(cl.devices()) + " devices");
  if (o.global_batch < 1) return Status::invalid("[plan] --global-batch must be >= 1");
  SearchResult r;
  std::vector<Prediction> all;
  auto consider = [&](const Prediction& p) {
    if (!p.runs) {
      const std::string kind = reason_kind(p.why_not);
      if (!r.rejected[kind]++) r.why[kind] = p.why_not;
      return false;
    }
    ++r.evaluated;
    all.push_back(p);
    return true;
  };
  // tp over the divisors of n_head inside a node (that divide the devices
  // and the MLP's width); a fixed tp is tried as given.
  std::vector<int> tps;
  for (int tp : divisors(md.n_head, cl.devices_per_node))
    if (o.devices % tp == 0 && (4 * md.n_embd) % tp == 0) tps.push_back(tp);
  for (int tp : over(fx.tp, tps)) {
    if (o.devices % tp) {
      ++r.rejected["tp does not divide the devices"];
      continue;
    }
    std::vector<int> pps;
    for (int pp : divisors(o.devices / tp, md.n_layer))
      if (md.n_layer % pp == 0) pps.push_back(pp);
    for (int pp : over(fx.pp, pps)) {
      if ((o.devices / tp) % pp) {  // a fixed pp with a tp searched: another grid, not a rejection
        if (fx.tp) ++r.rejected["tp x pp does not divide the devices"];
        continue;
      }
      const int dp = o.devices / (tp * pp);
      if (fx.dp && *fx.dp != dp) continue;  // another grid than the one asked for
      if (o.global_batch % dp) {
        ++r.rejected["global batch does not divide by dp"];
        continue;
      }
      const int64_t per_dp = o.global_batch / dp;
      // Micro-batch sizes: the divisors of the per-rank batch up to the
      // limit, or the one a fixed mb or m leaves.
      std::vector<int> mbs;
      if (fx.mb || fx.m) {
        const int64_t mb = fx.mb ? *fx.mb : per_dp / *fx.m;
        if (per_dp % (fx.mb ? *fx.mb : *fx.m) ||
            (fx.mb && fx.m && per_dp != int64_t(*fx.mb) * *fx.m)) {
          ++r.rejected["global batch does not divide by dp x mb x m"];
          continue;
        }
        mbs = {int(mb)};
      } else {
        mbs = divisors(per_dp, o.max_micro_batch);
      }
      std::vector<std::string> schedules = {"1f1b"};
      if (pp > 1 || fx.schedule) schedules = over(fx.schedule, {"1f1b", "interleaved", "zb-h1"});
      for (const std::string& sched : schedules) {
        std::vector<int> vs = sched == "interleaved" ? std::vector<int>{2, 4} : std::vector<int>{1};
        if (fx.v) {
          // A fixed v goes with the schedules that have it (v > 1: interleaved).
          if (!fx.schedule && (*fx.v > 1) != (sched == "interleaved")) continue;
          vs = {*fx.v};
        }
        for (int v : vs) {
          if (!fx.v && md.n_layer % (pp * v)) continue;
          for (int mb : mbs) {
            if (per_dp / mb > kMaxMicroBatches) {
              ++r.rejected["more micro-batches per step than the planner's limit of " +
                           std::to_string(kMaxMicroBatches)];
              continue;
            }
            const int m = int(per_dp / mb);
            if (pp > 1 && (m < pp || (sched == "interleaved" && m % pp))) {
              ++r.rejected["too few micro-batches for the pipeline"];
              continue;
            }
            for (const std::string& prec : over(fx.precision, o.precisions))
              for (bool sp : over(
                       fx.sp, tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false})) {
                if (sp && tp == 1) continue;  // no tokens to split (a fixed sp = true keeps tp > 1)
                for (int zero :
                     over(fx.zero, dp > 1 ? std::vector<int>{0, 1, 2} : std::vector<int>{0})) {
                  // From the cheapest memory saving up: the fused head (the
                  // same FLOPs), then each recompute policy without and
                  // with it; the first that fits ends it.
                  bool fits = false;
                  for (const std::string& rc : over(fx.recompute, {"none", "selective", "full"}))
                    for (bool fused : over(fx.fused_head, {false, true})) {
                      if (fits) break;
                      Candidate c = o.base;
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
  }
  std::stable_sort(all.begin(), all.end(), [](const Prediction& a, const Prediction& b) {
    return a.step_time_s < b.step_time_s;
  });
  if (all.size() > size_t(std::max(1, o.top))) all.resize(size_t(std::max(1, o.top)));
  r.best = std::move(all);
  return r;
}

}  // namespace crucible::plan
