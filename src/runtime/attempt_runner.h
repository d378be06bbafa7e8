// One attempt of a supervised job (runtime/supervisor.h): starts its ranks
// through the launcher (runtime/launcher.h), watches their heartbeats,
// processes and addresses, and ends it -- finished, stopped, or failed with
// its culprit named (runtime/attempt_outcome.h). What happens next (restart,
// shrink, grow, give up) is the supervisor's policy, not this file's.
#pragma once
#include <sys/socket.h>
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/attempt_outcome.h"
#include "runtime/event_log.h"
#include "runtime/run_dir.h"
#include "runtime/supervisor.h"

namespace crucible::runtime {

// One attempt's world: its size, gradient accumulation and hostfile ("" on
// one machine).
struct AttemptLayout {
  int world = 0, accum = 1;
  std::string hostfile;
};

// The way back after a failure, measured on the attempt that follows it.
struct Recovery {
  double detected_at = 0;  // monotonic seconds
  int64_t failed_step = 0, resume_step = 0;
  bool resumed = false, caught_up = false;
};

class AttemptRunner {
 public:
  AttemptRunner(const SuperviseOptions& opt, const RunPlan& plan, EventLog& events)
      : opt_(opt), plan_(plan), events_(events) {}
  AttemptRunner(const AttemptRunner&) = delete;
  AttemptRunner& operator=(const AttemptRunner&) = delete;
  // The heartbeat socket, bound once for the job's every attempt.
  Status open();
  // Runs attempt number `attempt` to its end. `recovery`, when set, gets
  // its "recovered" and "caught up" events. On SIGHUP `grow_possible` is
  // asked whether the job can grow back (and why not); when it can, the
  // ranks checkpoint and the attempt ends preempted with grow_requested().
  AttemptResult run(int attempt, const AttemptLayout& at, bool resume, std::optional<Recovery>& recovery,
                    const std::function<bool(std::string& why)>& grow_possible);
  bool grow_requested() const { return grow_pending_; }

 private:
  void drain(double now);  // every datagram waiting, of the attempt attempt_
  void send_to_ranks(const char* msg);
  void kill_job(pid_t child);
  std::vector<Reach> probe(const std::vector<int>& ranks);
  void annotate_hosts(AttemptResult& r) const;

  const SuperviseOptions& opt_;
  const RunPlan& plan_;
  EventLog& events_;
  int sock_ = -1;
  int port_ = 0;
  std::string host_;
  std::string reach_;  // the address ranks send their heartbeats to
  // The running attempt's ranks, and where each one's heartbeats come from.
  std::vector<RankState> ranks_;
  std::vector<sockaddr_storage> addrs_;
  std::vector<double> refused_at_;  // when a datagram to the rank last came back refused (-1: never)
  int attempt_ = 0;                 // the running attempt's number
  bool grow_pending_ = false;
  int grows_handled_ = 0;  // SIGHUPs acted on; one that came between attempts is acted on by the next
};

}  // namespace crucible::runtime
