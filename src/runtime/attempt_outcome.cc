#include "runtime/attempt_outcome.h"

#include <algorithm>
#include <map>

#include "runtime/event_log.h"

namespace crucible::runtime {

namespace {

// Ranks that stopped within this long of the first one went with it (one
// host, one kill); later ones were ended by the launcher after it.
constexpr double kSameLoss = 2.5 * std::chrono::duration<double>(kBeatInterval).count();

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

// "; every rank on host host2 died (the host answers: its processes are gone)"
// and the like, for the losses that took a whole host.
std::string host_clause(const std::vector<HostLoss>& hosts) {
  std::string s;
  for (const HostLoss& h : hosts) {
    if (!h.whole_host) continue;
    if (h.reach == Reach::kNoAnswer)
      s += "; host " + h.host + " is unreachable (nothing answers at its address: link or host down)";
    else
      s += "; every rank on host " + h.host + " died" +
           (h.reach == Reach::kAnswers ? " (the host answers: its processes are gone)" : "");
  }
  return s;
}

bool any_unreachable(const std::vector<HostLoss>& hosts) {
  return std::any_of(hosts.begin(), hosts.end(), [](const HostLoss& h) { return h.reach == Reach::kNoAnswer; });
}

}  // namespace

const char* reach_name(Reach r) {
  return r == Reach::kAnswers ? "answers" : r == Reach::kNoAnswer ? "no answer" : "not asked";
}

RankView view_of(int k, const RankState& q, double now) {
  return {k, q.seen, q.last.step, q.last.phase, q.last.seq, now - q.last_change,
          q.last.op, q.last.micro, q.last.chunk, q.last.stage};
}

int64_t step_reached(const std::vector<RankState>& ranks) {
  int64_t s = 0;
  for (const auto& r : ranks) s = std::max(s, r.last.step);
  return s;
}

std::vector<HostLoss> group_by_host(const std::vector<RankState>& all, const std::vector<int>& ranks,
                                    const std::vector<Reach>& reach) {
  std::map<std::string, size_t> on_host;  // ranks of the attempt per host
  for (const RankState& r : all)
    if (r.seen) ++on_host[r.last.host];
  std::vector<HostLoss> out;
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (int k : sorted) {
    const RankState& r = all[size_t(k)];
    const std::string host = r.seen ? r.last.host : "unknown";
    auto it = std::find_if(out.begin(), out.end(), [&](const HostLoss& h) { return h.host == host; });
    if (it == out.end()) {
      out.push_back({host, {}, false, Reach::kUnknown, ""});
      it = out.end() - 1;
    }
    it->ranks.push_back(k);
    const Reach a = size_t(k) < reach.size() ? reach[size_t(k)] : Reach::kUnknown;
    // One rank with no answer makes the host unreachable; one that answers, reachable.
    if (a == Reach::kNoAnswer || (a == Reach::kAnswers && it->reach == Reach::kUnknown)) it->reach = a;
  }
  for (HostLoss& h : out)
    h.whole_host = h.host != "unknown" && h.ranks.size() == on_host[h.host] && on_host.size() > 1;
  return out;
}

AttemptResult classify_end(const std::vector<RankState>& ranks, int code, int64_t target_step,
                           bool stopping, const std::vector<Reach>& reach, double now) {
  AttemptResult res;
  res.step_reached = step_reached(ranks);
  bool all_ok = true, any3 = false, any2 = false;
  int msg_rank = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankState& r = ranks[i];
    all_ok &= r.exited && r.code == 0;
    any3 |= r.exited && r.code == 3;
    any2 |= r.exited && r.code == 2;
    if (r.exited && r.code != 0 && !r.message.empty() && msg_rank < 0) msg_rank = int(i);
  }
  // The launcher's 0 alone is not an end: a rank on another host killed with
  // SIGKILL can leave mpirun at 0. Short of the step the job was to reach, a
  // rank that never reported its exit died (below).
  const bool silent = std::any_of(ranks.begin(), ranks.end(), [](const RankState& r) { return !r.exited; });
  if ((all_ok || code == 0) && !any3 && !(silent && res.step_reached < target_step)) {
    res.outcome = Outcome::kFinished;
    return res;
  }
  if (any3 || stopping) {
    // Ranks exit only after agreeing that the checkpoint is on disk, and
    // the launcher may kill the last ones before they report: clean unless a
    // rank reported something other than "stopped".
    res.outcome = Outcome::kPreempted;
    res.clean_stop = any3 && std::none_of(ranks.begin(), ranks.end(),
                                          [](const RankState& r) { return r.exited && r.code != 3; });
    return res;
  }
  if (any2 || (code == 2 && std::none_of(ranks.begin(), ranks.end(), [](const RankState& r) { return r.exited; }))) {
    res.outcome = Outcome::kBadInput;
    res.message = msg_rank >= 0 ? ranks[size_t(msg_rank)].message : "";
    return res;
  }
  res.outcome = Outcome::kFailed;
  res.detected_at = now;
  // The ranks that never reported their exit died; the one silent longest
  // went first (the launcher ends the others after it), with every rank that
  // stopped at about the same time.
  std::vector<int> dead;
  for (size_t i = 0; i < ranks.size(); ++i)
    if (!ranks[i].exited) dead.push_back(int(i));
  std::stable_sort(dead.begin(), dead.end(),
                   [&](int a, int b) { return ranks[size_t(a)].last_beat < ranks[size_t(b)].last_beat; });
  // An error report that came after a death is the death's consequence (a
  // collective that lost its peer), not the cause.
  if (msg_rank >= 0 && !dead.empty() && ranks[size_t(dead[0])].seen &&
      ranks[size_t(dead[0])].last_beat + kSameLoss < ranks[size_t(msg_rank)].last_beat)
    msg_rank = -1;
  if (msg_rank >= 0) {
    const RankState& r = ranks[size_t(msg_rank)];
    res.what = "error";
    res.culprits = {msg_rank};
    res.message = "rank " + std::to_string(msg_rank) + " failed in " +
                  describe_position(r.last.step, r.last.phase) + ": " + r.message;
    res.detect_s = now - r.last_beat;
    res.phase = r.last.phase;
    return res;
  }
  for (int k : dead)
    if (ranks[size_t(k)].last_beat <= ranks[size_t(dead[0])].last_beat + kSameLoss) res.culprits.push_back(k);
  res.hosts = group_by_host(ranks, res.culprits, reach);
  res.what = any_unreachable(res.hosts) ? "host lost" : "died";
  std::string who;
  if (!dead.empty()) {
    const RankState& first = ranks[size_t(dead[0])];
    who = " without a report from rank " + std::to_string(dead[0]) + " (host " +
          (first.seen ? first.last.host : "unknown") + ", last in " +
          describe_position(view_of(dead[0], first, now)) + ")";
    res.detect_s = first.seen ? now - first.last_beat : 0;
    res.phase = first.last.phase;
  }
  res.message = "the job ended with code " + std::to_string(code) + who + host_clause(res.hosts);
  return res;
}

std::vector<int> silent_ranks(const std::vector<RankState>& ranks, double now, double window) {
  std::vector<int> out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankState& r = ranks[i];
    if (r.seen && !r.exited && !r.local && r.last.phase != Phase::kDone && now - r.last_beat > window)
      out.push_back(int(i));
  }
  return out;
}

AttemptResult classify_silence(const std::vector<RankState>& ranks, const std::vector<int>& silent,
                               const std::vector<Reach>& reach, double window, double now) {
  AttemptResult res;
  res.outcome = Outcome::kFailed;
  res.step_reached = step_reached(ranks);
  res.detected_at = now;
  res.culprits = silent;
  std::sort(res.culprits.begin(), res.culprits.end());
  res.hosts = group_by_host(ranks, res.culprits, reach);
  res.what = any_unreachable(res.hosts) ? "host lost" : "died";
  const int first = *std::min_element(res.culprits.begin(), res.culprits.end(), [&](int a, int b) {
    return ranks[size_t(a)].last_beat < ranks[size_t(b)].last_beat;
  });
  const RankState& r = ranks[size_t(first)];
  res.phase = r.last.phase;
  res.detect_s = now - r.last_beat;
  std::string msg;
  for (const HostLoss& h : res.hosts) {
    msg += msg.empty() ? "" : "; ";
    const std::string heard = "no heartbeat from its " + rank_list(h.ranks) + " for " +
                              fmt_s(now - ranks[size_t(h.ranks[0])].last_beat) + " (window " +
                              fmt_s(window) + "; last in " +
                              describe_position(view_of(h.ranks[0], ranks[size_t(h.ranks[0])], now)) + ")";
    if (h.reach == Reach::kNoAnswer)
      msg += "host " + h.host + " is unreachable: " + heard +
             " and nothing answers at its address (link or host down)";
    else if (h.whole_host)
      msg += "every process on host " + h.host + " is gone: " + heard +
             (h.reach == Reach::kAnswers ? "; the host answers" : "");
    else
      msg += rank_list(h.ranks) + " on host " + h.host + " died: " + heard +
             (h.reach == Reach::kAnswers ? "; the host answers, the process is gone" : "");
  }
  res.message = msg;
  return res;
}

int first_hung(const std::vector<RankState>& ranks, double now, double setup_timeout,
               double hang_timeout) {
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankState& r = ranks[i];
    if (r.exited || (r.seen && r.last.phase == Phase::kDone)) continue;
    const bool setup = !r.seen || r.last.phase == Phase::kSetup;
    if (now - r.last_change > (setup ? setup_timeout : hang_timeout)) return int(i);
  }
  return -1;
}

}  // namespace crucible::runtime
