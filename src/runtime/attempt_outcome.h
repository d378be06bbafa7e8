// What became of one attempt of a supervised job, decided from what the
// supervisor knows of its ranks (their last heartbeats, exit reports and what
// their addresses answered) and, at the end, the launcher's exit code. Pure
// functions: the supervisor (runtime/supervisor.cc) feeds them and acts on
// the answer; the unit tests feed them the situations a job meets.
//
// Failures it tells apart (docs/fault_tolerance.md, "What is detected"):
//   - a rank whose process is gone without an exit report (killed, crashed),
//     and a host all of whose ranks went that way together ("every rank on
//     host2 died; the host answers");
//   - a host that stopped answering: its ranks' heartbeats stopped crossing
//     the network for fault.heartbeat_window_s and nothing answers at their
//     addresses (link cut, host down) -- "host lost";
//   - a hang (no progress for fault.hang_timeout_s, runtime/hang_diagnosis.h);
//   - a rank's own error report.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/hang_diagnosis.h"
#include "runtime/heartbeat.h"

namespace crucible::runtime {

// What the supervisor knows of one rank of the running attempt.
struct RankState {
  bool seen = false;    // sent at least one heartbeat
  bool exited = false;  // sent its exit report
  bool local = false;   // runs on the supervisor's machine (its pid can be checked)
  Beat last;            // its last heartbeat (or exit report)
  double last_change = 0;  // when its position last changed (monotonic seconds)
  double last_beat = 0;    // when anything last arrived from it
  int code = 0;            // exit report
  std::string message;
};
RankView view_of(int k, const RankState& q, double now);
int64_t step_reached(const std::vector<RankState>& ranks);  // the most any rank got to

// What a silent rank's address answered to the supervisor's probe.
enum class Reach {
  kUnknown,      // not asked
  kAnswers,      // the host answered (its port for the rank is closed: the process is gone)
  kNoAnswer,     // nothing came back: the link or the host is down
};

// The ranks of one host that stopped.
struct HostLoss {
  std::string host;         // the name its ranks reported
  std::vector<int> ranks;   // its ranks that stopped, ascending
  bool whole_host = false;  // every rank of the attempt on that host, and not every rank of the job
  Reach reach = Reach::kUnknown;
  std::string address;      // where its ranks' heartbeats came from (filled in by the supervisor)
};
const char* reach_name(Reach r);  // "answers" | "no answer" | "not asked"

enum class Outcome { kFinished, kPreempted, kBadInput, kFailed };

struct AttemptResult {
  Outcome outcome = Outcome::kFailed;
  std::string what;  // failures: "died", "host lost", "hang", "error", "launch failed"
  std::vector<int> culprits;
  std::vector<HostLoss> hosts;  // the hosts of the ranks that stopped
  std::string message;          // one line for the terminal
  Phase phase = Phase::kSetup;
  int64_t step_reached = 0;
  double detect_s = 0;     // the culprit's last sign of life -> detection
  double detected_at = 0;  // monotonic seconds
  bool clean_stop = true;  // preempted: every rank checkpointed and exited 3
};

// The attempt whose launcher (mpirun, srun) exited with `code`: finished (at
// `target_step`), preempted (a stop was asked, or a rank exited 3), bad input
// (a rank exited 2), or a failure naming its culprit. `reach` (one per rank,
// or empty) is what the ranks without an exit report answered.
AttemptResult classify_end(const std::vector<RankState>& ranks, int code, int64_t target_step,
                           bool stopping, const std::vector<Reach>& reach, double now);

// Ranks on other hosts whose heartbeats stopped arriving: seen, not exited
// nor done, and nothing from them for `window` seconds (the supervisor's own
// host's ranks are watched through their pids). A rank's heartbeat thread beats
// every kBeatInterval whatever its training thread does, so silence means
// the process or the path to it is gone, not that it is slow.
std::vector<int> silent_ranks(const std::vector<RankState>& ranks, double now, double window);

// The failure of the attempt while it runs, for the silent ranks `silent`
// (non-empty) with what their addresses answered (`reach`, one per rank).
AttemptResult classify_silence(const std::vector<RankState>& ranks, const std::vector<int>& silent,
                               const std::vector<Reach>& reach, double window, double now);

// `ranks` grouped by the host they reported, in rank order.
std::vector<HostLoss> group_by_host(const std::vector<RankState>& all, const std::vector<int>& ranks,
                                    const std::vector<Reach>& reach);

// The first rank with no progress past its limit: setup_timeout before its
// first step (or before its first heartbeat), hang_timeout after. -1: none.
int first_hung(const std::vector<RankState>& ranks, double now, double setup_timeout,
               double hang_timeout);

}  // namespace crucible::runtime
