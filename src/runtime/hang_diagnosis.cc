#include "runtime/hang_diagnosis.h"

#include <algorithm>
#include <cstdio>

#include "parallel/schedule.h"

namespace crucible::runtime {

namespace {

std::string rank_list(const std::vector<int>& r) {
  std::string s = r.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < r.size(); ++i) s += (i ? ", " : "") + std::to_string(r[i]);
  return s;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

}  // namespace

std::string describe_position(int64_t step, Phase phase) {
  if (phase == Phase::kSetup)
    return step > 0 ? "setup (resuming at step " + std::to_string(step) + ")" : "setup";
  if (phase == Phase::kDone) return "done (step " + std::to_string(step) + ")";
  return std::string(phase_name(phase)) + " of step " + std::to_string(step);
}

std::string describe_position(const RankView& r) {
  if (r.phase != Phase::kPipeline || r.op < 0) return describe_position(r.step, r.phase);
  return std::string(parallel::op_name(parallel::Op(r.op))) + " of micro-batch " + std::to_string(r.micro) +
         " (stage " + std::to_string(r.stage) + ", chunk " + std::to_string(r.chunk) + ") in " +
         describe_position(r.step, r.phase);
}

namespace {

bool receiving(const RankView& r) {
  return r.op == int(parallel::Op::kRecvActivation) || r.op == int(parallel::Op::kRecvGradient);
}

// Every rank is in the same step's pipeline schedule.
HangDiagnosis diagnose_pipeline(const std::vector<RankView>& ranks) {
  HangDiagnosis d;
  std::string stuck, waits;
  for (const RankView& r : ranks) {
    const std::string at = "rank " + std::to_string(r.rank) + " in " + describe_position(r);
    if (receiving(r)) {
      waits += (waits.empty() ? "" : "; ") + at;
    } else {
      d.culprits.push_back(r.rank);
      stuck += (stuck.empty() ? "" : "; ") + at + " for " + seconds(r.idle_s);
    }
  }
  if (d.culprits.empty()) {
    for (const RankView& r : ranks) d.culprits.push_back(r.rank);
    d.message = "every stage waits in a receive (" + waits +
                "): the stages' messages are stuck (interconnect or MPI), not a computation";
  } else {
    d.message = "no progress: " + stuck + (waits.empty() ? "" : "; waiting for it: " + waits);
  }
  return d;
}

}  // namespace

HangDiagnosis diagnose_hang(const std::vector<RankView>& ranks) {
  HangDiagnosis d;
  std::vector<int> silent;
  for (const RankView& r : ranks)
    if (!r.seen) silent.push_back(r.rank);
  if (!silent.empty()) {
    d.culprits = silent;
    d.message = rank_list(silent) + " never sent a heartbeat (did not start, or hung before it could)";
    return d;
  }
  if (ranks.empty()) return d;
  uint64_t lo = ranks[0].seq, hi = ranks[0].seq;
  for (const RankView& r : ranks) lo = std::min(lo, r.seq), hi = std::max(hi, r.seq);
  if (lo == hi && std::all_of(ranks.begin(), ranks.end(), [&](const RankView& x) {
        return x.phase == Phase::kPipeline && x.step == ranks[0].step;
      }))
    return diagnose_pipeline(ranks);
  std::vector<const RankView*> behind, ahead;
  for (const RankView& r : ranks) (r.seq == lo ? behind : ahead).push_back(&r);
  for (const RankView* r : behind) d.culprits.push_back(r->rank);
  if (lo == hi) {
    const RankView& r = ranks[0];
    bool same = std::all_of(ranks.begin(), ranks.end(),
                            [&](const RankView& x) { return x.phase == r.phase; });
    double idle = 0;
    for (const RankView& x : ranks) idle = std::max(idle, x.idle_s);
    if (same && phase_is_collective(r.phase)) {
      d.message = "every rank waits in " + describe_position(r.step, r.phase) + " (for " +
                  seconds(idle) +
                  "): all arrived, so the collective itself is stuck (interconnect or MPI)";
    } else {
      d.message = rank_list(d.culprits) + " made no progress in " + describe_position(r) + " for " + seconds(idle);
    }
    return d;
  }
  // The others wait at the most advanced point; the culprits never got there.
  const RankView* front = ahead[0];
  for (const RankView* r : ahead)
    if (r->seq > front->seq) front = r;
  std::vector<int> waiting;
  for (const RankView* r : ahead) waiting.push_back(r->rank);
  std::string what;
  for (const RankView* r : behind)
    what += std::string(what.empty() ? "" : "; ") + "rank " + std::to_string(r->rank) +
            " was last in " + describe_position(*r) + ", no progress for " +
            seconds(r->idle_s);
  d.message = rank_list(d.culprits) + " never arrived at " +
              describe_position(front->step, front->phase) + " (" + what + "); " +
              rank_list(waiting) + (waiting.size() == 1 ? " waits" : " wait") + " there";
  return d;
}

}  // namespace crucible::runtime
