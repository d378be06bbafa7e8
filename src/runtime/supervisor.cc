#include "runtime/supervisor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "ckpt/checkpoint.h"
#include "core/clock.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "core/process.h"
#include "core/threads.h"
#include "runtime/hang_diagnosis.h"
#include "runtime/memory_estimate.h"
#include "runtime/heartbeat.h"
#include "runtime/launcher.h"

namespace crucible::runtime {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

volatile std::sig_atomic_t g_signals = 0;
extern "C" void on_supervisor_signal(int) { g_signals = g_signals + 1; }

double mono_s() { return now_ns() * 1e-9; }

// RUN/job.json (the supervisor's account of the job); null when there is none
// or it does not parse.
json read_job(const std::string& run) {
  auto j = read_json(run + "/job.json");
  return j ? *j : json();
}  // the one monotonic clock (core/clock.h)

std::string fmt_s(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

// RUN/events.jsonl: one JSON object per event, appended and fsync'ed (the
// file is the job's history; a crash must not lose its last lines), and the
// same event as one line on the terminal.
class EventLog {
 public:
  Status open(const std::string& path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) return Status::io("[launch] cannot open " + path + ": " + errno_str());
    t0_ = mono_s();
    return Status::ok();
  }
  ~EventLog() {
    if (fd_ >= 0) ::close(fd_);
  }
  void emit(const std::string& event, json fields, const std::string& line) {
    json j = {{"time", wall_time("%Y-%m-%dT%H:%M:%S", false)}, {"t_s", std::round((mono_s() - t0_) * 1000) / 1000}, {"event", event}};
    j.update(fields);
    std::string text = j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    if (fd_ >= 0 && (::write(fd_, text.data(), text.size()) != ssize_t(text.size()) ||
                     ::fsync(fd_) != 0))
      std::fprintf(stderr, "[supervisor] warning: events.jsonl: %s\n", errno_str().c_str());
    std::fprintf(stderr, "[supervisor] %s\n", line.c_str());
    std::fflush(stderr);
  }

 private:
  int fd_ = -1;
  double t0_ = 0;
};

struct RankState {
  bool seen = false, exited = false, gone = false;
  Beat last;
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  double last_change = 0, last_beat = 0;
  int code = 0;
  std::string message;
};

// What the hang diagnosis sees of rank k at time now.
RankView view_of(int k, const RankState& q, double now) {
  return {k, q.seen, q.last.step, q.last.phase, q.last.seq, now - q.last_change,
          q.last.op, q.last.micro, q.last.chunk, q.last.stage};
}

enum class Outcome { kFinished, kPreempted, kBadInput, kFailed };

struct AttemptResult {
  Outcome outcome = Outcome::kFailed;
  std::string what;     // "died", "hang", "exited with code 1", ...
  std::vector<int> culprits;
  std::string message;  // one line for the terminal
  Phase phase = Phase::kSetup;
  int64_t step_reached = 0;  // most steps completed by any rank
  double detect_s = 0;       // failure (last sign of the culprit) -> detection
  double detected_at = 0;    // mono_s
  bool clean_stop = true;    // preempted: every rank checkpointed and exited 3
};

class Supervisor {
 public:
  Supervisor(const SuperviseOptions& opt, RunPlan plan) : opt_(opt), plan_(std::move(plan)) {}
  Result<int> run();

 private:
  Status open_socket();
  AttemptResult run_attempt(int attempt, int world, int accum, bool resume);
  void drain(std::vector<RankState>& ranks, double now, int attempt);
  void stop_ranks(const std::vector<RankState>& ranks);
  void kill_job(pid_t child, std::vector<RankState>& ranks);
  void write_job_state(const std::string& state, int attempt, int world);
  int64_t newest_valid_step();

  const SuperviseOptions& opt_;
  RunPlan plan_;
  EventLog events_;
  int sock_ = -1;
  int port_ = 0;
  std::string host_;
  // Recovery measurement for the attempt after a failure.
  struct Recovery {
    double detected_at = 0;
    int64_t failed_step = 0, resume_step = 0;
    bool resumed = false, caught_up = false;
  };
  std::optional<Recovery> recovery_;
};

Status Supervisor::open_socket() {
  sock_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock_ < 0) return Status::io("[launch] socket: " + errno_str());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  // Ranks on this machine reach loopback; with a hostfile they come from afar.
  a.sin_addr.s_addr = opt_.launch.hostfile.empty() ? htonl(INADDR_LOOPBACK) : htonl(INADDR_ANY);
  a.sin_port = 0;
  if (::bind(sock_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return Status::io("[launch] binding the heartbeat socket: " + errno_str());
  // Room for every beat between two polls even when steps take microseconds.
  int rcvbuf = 8 << 20;
  ::setsockopt(sock_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  socklen_t len = sizeof a;
  ::getsockname(sock_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  host_ = host_name();
  return Status::ok();
}

// Reads every datagram waiting. Beats of another attempt are dropped: the
// ranks of a killed attempt may have sent some just before they died, and
// they would read as this attempt's ranks (and then as dead ones).
void Supervisor::drain(std::vector<RankState>& ranks, double now, int attempt) {
  char buf[1024];
  for (;;) {
    sockaddr_storage from{};
    socklen_t len = sizeof from;
    ssize_t n = ::recvfrom(sock_, buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from),
                           &len);
    if (n <= 0) return;
    Beat b;
    if (!decode(std::string(buf, size_t(n)), b)) continue;
    if (b.attempt != attempt || b.rank < 0 || b.rank >= int(ranks.size())) continue;
    RankState& r = ranks[size_t(b.rank)];
    // A pipeline action is progress too (it does not count in seq).
    if (!r.seen || b.seq != r.last.seq || b.step != r.last.step || b.op != r.last.op || b.micro != r.last.micro ||
        b.chunk != r.last.chunk)
      r.last_change = now;
    r.seen = true;
    r.last = b;
    r.last_beat = now;
    r.addr = from;
    r.addr_len = len;
    if (b.type == "exit") {
      r.exited = true;
      r.code = b.code;
      r.message = b.message;
    }
  }
}

void Supervisor::stop_ranks(const std::vector<RankState>& ranks) {
  static const char kStop[] = "{\"t\":\"stop\"}";
  for (const RankState& r : ranks)
    if (r.seen && !r.exited)
      ::sendto(sock_, kStop, sizeof kStop - 1, 0, reinterpret_cast<const sockaddr*>(&r.addr),
               r.addr_len);
}

void Supervisor::kill_job(pid_t child, std::vector<RankState>& ranks) {
  for (const RankState& r : ranks)
    if (r.seen && r.last.host == host_) ::kill(pid_t(r.last.pid), SIGKILL);
  ::kill(-child, SIGKILL);
  ::kill(child, SIGKILL);
  int st = 0;
  ::waitpid(child, &st, 0);
  // The ranks were mpirun's children; as the subreaper this process inherits
  // and reaps them. Wait until every local rank is really gone, so the next
  // attempt never shares the run directory with a survivor.
  const double deadline = mono_s() + 10;
  for (;;) {
    while (::waitpid(-1, &st, WNOHANG) > 0) {
    }
    bool any = false;
    for (const RankState& r : ranks)
      if (r.seen && r.last.host == host_ && process_alive(pid_t(r.last.pid))) any = true;
    if (!any || mono_s() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Supervisor::write_job_state(const std::string& state, int attempt, int world) {
  json j = {{"state", state}, {"attempt", attempt}, {"world", world}, {"pid", int(::getpid())}};
  Status s = write_file_atomic(plan_.run_dir + "/job.json", j.dump(2) + "\n");
  if (!s.is_ok()) std::fprintf(stderr, "[supervisor] warning: %s\n", s.message().c_str());
}

int64_t Supervisor::newest_valid_step() {
  auto found = ckpt::find_latest_valid(plan_.run_dir + "/ckpt");
  return found ? found->step : 0;
}

AttemptResult Supervisor::run_attempt(int attempt, int world, int accum, bool resume) {
  const RunRequest& req = opt_.request;
  std::vector<std::string> args = {"train"};
  if (!req.config_path.empty()) args.push_back(req.config_path);
  for (const auto& o : req.overrides) args.insert(args.end(), {"--set", o});
  if (accum != plan_.config.train.grad_accum)
    args.insert(args.end(), {"--set", "train.grad_accum=" + std::to_string(accum)});
  args.insert(args.end(), {"--run-dir", plan_.run_dir});
  if (resume) args.push_back("--resume");
  if (opt_.stop_at > 0) args.insert(args.end(), {"--stop-at", std::to_string(opt_.stop_at)});
  if (opt_.metrics_port > 0)
    args.insert(args.end(), {"--metrics-port", std::to_string(opt_.metrics_port), "--metrics-bind",
                             opt_.metrics_bind});

  // Where ranks send their heartbeats: loopback on one machine; with a
  // hostfile the address this machine has towards the other hosts (its host
  // name may resolve to a loopback address, 127.0.1.1 on a stock Debian).
  std::string reach = "127.0.0.1";
  if (!opt_.launch.hostfile.empty()) {
    reach = address_facing(hostfile_hosts(opt_.launch.hostfile));
    if (reach.empty()) reach = host_;
  }
  ::setenv(kSupervisorEnv, (reach + ":" + std::to_string(port_)).c_str(), 1);
  ::setenv(kSupervisorPidEnv, std::to_string(::getpid()).c_str(), 1);
  ::setenv(kSupervisorHostEnv, host_.c_str(), 1);
  ::setenv(kAttemptEnv, std::to_string(attempt).c_str(), 1);
  LaunchSpec spec = opt_.launch;
  spec.ranks = world;
  spec.env_to_forward = {kSupervisorEnv, kSupervisorPidEnv, kSupervisorHostEnv, kAttemptEnv};
  std::vector<std::string> argv = launcher_command(spec, self_executable(), args);
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
  std::fprintf(stderr, "[launch] %s\n", line.c_str());
  std::fflush(stderr);

  std::vector<RankState> ranks(static_cast<size_t>(world));
  AttemptResult res;
  const double start = mono_s();
  pid_t child = ::fork();
  if (child == 0) {
    ::setpgid(0, 0);  // Ctrl-C on the terminal reaches the supervisor only
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // and the job dies with the supervisor
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    ::execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "[launch] cannot run %s: %s\n", cargv[0], std::strerror(errno));
    ::_exit(127);
  }
  if (child < 0) {
    res.what = "launch failed";
    res.message = "fork: " + errno_str();
    return res;
  }
  ::setpgid(child, child);
  for (auto& r : ranks) r.last_change = start;

  int handled = g_signals;
  bool announced = false;  // ranks_up emitted
  bool stopping = false;
  double stop_deadline = 0;
  const FaultConfig& fc = plan_.config.fault;
  auto step_reached = [&] {
    int64_t s = 0;
    for (const auto& r : ranks) s = std::max(s, r.last.step);
    return s;
  };
  auto fail = [&](const std::string& what, std::vector<int> culprits, const std::string& msg,
                  double since) {
    res.outcome = Outcome::kFailed;
    res.what = what;
    res.culprits = std::move(culprits);
    res.message = msg;
    res.detected_at = mono_s();
    res.detect_s = res.detected_at - since;
    if (!res.culprits.empty()) res.phase = ranks[size_t(res.culprits[0])].last.phase;
    res.step_reached = step_reached();
    kill_job(child, ranks);
    return res;
  };

  for (;;) {
    pollfd p{sock_, POLLIN, 0};
    ::poll(&p, 1, 20);
    const double now = mono_s();
    drain(ranks, now, attempt);

    if (!announced && std::all_of(ranks.begin(), ranks.end(),
                                  [](const RankState& r) { return r.seen; })) {
      announced = true;
      json pids = json::array(), hosts = json::array();
      std::string list;
      for (const RankState& r : ranks) {
        pids.push_back(r.last.pid);
        hosts.push_back(r.last.host);
        list += (list.empty() ? "" : " ") + std::to_string(r.last.pid);
      }
      events_.emit("ranks_up", {{"attempt", attempt}, {"world", world}, {"pids", pids}, {"hosts", hosts}},
                   "attempt " + std::to_string(attempt) + ": " + std::to_string(world) +
                       " ranks up (pids " + list + ") after " + fmt_s(now - start));
    }
    // Recovery after an earlier failure: back to training, then back to where it failed.
    if (recovery_) {
      const int64_t s = step_reached();
      if (!recovery_->resumed && s > recovery_->resume_step) {
        recovery_->resumed = true;
        events_.emit("recovered",
                     {{"attempt", attempt},
                      {"recover_s", now - recovery_->detected_at},
                      {"step", s}},
                     "attempt " + std::to_string(attempt) + " is training again (step " +
                         std::to_string(s) + ") " + fmt_s(now - recovery_->detected_at) +
                         " after the failure was detected");
      }
      if (!recovery_->caught_up && s >= recovery_->failed_step) {
        recovery_->caught_up = true;
        events_.emit("caught_up",
                     {{"attempt", attempt},
                      {"catchup_s", now - recovery_->detected_at},
                      {"step", s}},
                     "back at step " + std::to_string(recovery_->failed_step) + " " +
                         fmt_s(now - recovery_->detected_at) + " after the failure was detected");
      }
    }

    int st = 0;
    pid_t done = ::waitpid(child, &st, WNOHANG);
    if (done == child) {
      drain(ranks, mono_s(), attempt);
      while (::waitpid(-1, &st, WNOHANG) > 0) {
      }
      res.step_reached = step_reached();
      const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      bool all_ok = true, any3 = false, any2 = false;
      int msg_rank = -1;
      for (size_t i = 0; i < ranks.size(); ++i) {
        const RankState& r = ranks[i];
        all_ok &= r.exited && r.code == 0;
        any3 |= r.exited && r.code == 3;
        any2 |= r.exited && r.code == 2;
        if (r.exited && r.code != 0 && !r.message.empty() && msg_rank < 0) msg_rank = int(i);
      }
      // mpirun's 0 alone is not an end: a rank on another host killed with
      // SIGKILL can leave it at 0. Short of the step the job was to reach,
      // a rank that never reported its exit died (below).
      const int64_t target = opt_.stop_at > 0 ? opt_.stop_at : plan_.config.train.steps;
      const bool silent = std::any_of(ranks.begin(), ranks.end(), [](const RankState& r) { return !r.exited; });
      if ((all_ok || code == 0) && !any3 && !(silent && res.step_reached < target)) {
        res.outcome = Outcome::kFinished;
        return res;
      }
      if (any3 || stopping) {
        // Ranks exit only after agreeing that the checkpoint is on disk, and
        // mpirun may kill the last ones before they report: clean unless a
        // rank reported something other than "stopped".
        res.outcome = Outcome::kPreempted;
        res.clean_stop = any3 && std::none_of(ranks.begin(), ranks.end(), [](const RankState& r) {
                           return r.exited && r.code != 3;
                         });
        return res;
      }
      if (any2 || (code == 2 && std::none_of(ranks.begin(), ranks.end(),
                                             [](const RankState& r) { return r.exited; }))) {
        res.outcome = Outcome::kBadInput;
        res.message = msg_rank >= 0 ? ranks[size_t(msg_rank)].message : "";
        return res;
      }
      // A rank that never reported its exit died; otherwise the first message.
      std::vector<int> dead;
      for (size_t i = 0; i < ranks.size(); ++i)
        if (!ranks[i].exited) dead.push_back(int(i));
      // The one silent longest went first (mpirun ends the others after it).
      std::stable_sort(dead.begin(), dead.end(),
                       [&](int a, int b) { return ranks[size_t(a)].last_beat < ranks[size_t(b)].last_beat; });
      res.outcome = Outcome::kFailed;
      res.detected_at = mono_s();
      if (msg_rank >= 0) {
        res.what = "error";
        res.culprits = {msg_rank};
        res.message = "rank " + std::to_string(msg_rank) + " failed in " +
                      describe_position(ranks[size_t(msg_rank)].last.step,
                                        ranks[size_t(msg_rank)].last.phase) +
                      ": " + ranks[size_t(msg_rank)].message;
        res.detect_s = res.detected_at - ranks[size_t(msg_rank)].last_beat;
      } else {
        res.what = "died";
        res.culprits = dead;
        res.message = "the job ended with code " + std::to_string(code) +
                      (dead.empty() ? ""
                                    : " without a report from rank " + std::to_string(dead[0]) + " (host " +
                                          (ranks[size_t(dead[0])].seen ? ranks[size_t(dead[0])].last.host : "unknown") +
                                          ", last in " + describe_position(view_of(dead[0], ranks[size_t(dead[0])], mono_s())) +
                                          ")");
        res.detect_s = 0;
      }
      if (!res.culprits.empty()) res.phase = ranks[size_t(res.culprits[0])].last.phase;
      return res;
    }

    // A local rank whose process is gone without reporting its exit died
    // (killed, crashed). Checked every tick, before mpirun reacts to it.
    for (size_t i = 0; i < ranks.size(); ++i) {
      RankState& r = ranks[i];
      if (!r.seen || r.exited || r.last.host != host_ || process_alive(pid_t(r.last.pid))) continue;
      drain(ranks, now, attempt);  // its exit report may have just arrived
      if (r.exited) continue;
      return fail("died", {int(i)},
                  "rank " + std::to_string(i) + " (pid " + std::to_string(r.last.pid) +
                      ") died in " + describe_position(view_of(int(i), r, now)) +
                      " (killed or crashed; no exit report)",
                  r.last_beat);
    }

    // Hang: a rank whose position has not changed for the timeout.
    if (!stopping) {
      for (size_t i = 0; i < ranks.size(); ++i) {
        const RankState& r = ranks[i];
        if (r.exited || (r.seen && r.last.phase == Phase::kDone)) continue;
        const bool setup = !r.seen || r.last.phase == Phase::kSetup;
        const double limit = setup ? fc.setup_timeout_s : fc.hang_timeout_s;
        if (now - r.last_change <= limit) continue;
        std::vector<RankView> views;
        for (size_t k = 0; k < ranks.size(); ++k) views.push_back(view_of(int(k), ranks[k], now));
        HangDiagnosis d = diagnose_hang(views);
        return fail("hang", d.culprits,
                    "hang: no progress for " + fmt_s(now - r.last_change) + " (limit " +
                        fmt_s(limit) + "): " + d.message,
                    r.last_change);
      }
    }

    // Preemption: the first signal asks the ranks to checkpoint and exit, a
    // second one (or the grace period running out) kills the job.
    if (g_signals != handled) {
      handled = g_signals;
      if (!stopping) {
        stopping = true;
        stop_deadline = now + fc.stop_grace_s;
        stop_ranks(ranks);
        events_.emit("stop_requested", {{"attempt", attempt}, {"step", step_reached()}},
                     "signal received: the ranks checkpoint at the next step boundary and exit "
                     "(again to kill them now)");
      } else {
        res.step_reached = step_reached();
        kill_job(child, ranks);
        res.outcome = Outcome::kPreempted;
        res.clean_stop = false;
        return res;
      }
    }
    if (stopping) {
      stop_ranks(ranks);  // ranks that were still starting up get it too
      if (now > stop_deadline) {
        res.step_reached = step_reached();
        kill_job(child, ranks);
        res.outcome = Outcome::kPreempted;
        res.clean_stop = false;
        return res;
      }
    }
  }
}

Result<int> Supervisor::run() {
  CRUCIBLE_RETURN_IF_ERROR(open_socket());
  CRUCIBLE_RETURN_IF_ERROR(events_.open(plan_.run_dir + "/events.jsonl"));
  const int full = opt_.launch.ranks;
  const int min_ranks = opt_.min_ranks > 0 ? std::min(opt_.min_ranks, full) : full;
  const int base_accum = plan_.config.train.grad_accum;
  const FaultConfig& fc = plan_.config.fault;
  int world = full, accum = base_accum;
  int restarts = 0, failures_here = 0;
  std::vector<std::string> history;

  events_.emit("job_start",
               {{"run_dir", plan_.run_dir}, {"world", world}, {"min_ranks", min_ranks},
                {"max_restarts", fc.max_restarts}, {"resume_step", newest_valid_step()}},
               "supervising " + std::to_string(world) + " ranks in " + plan_.run_dir +
                   " (hang timeout " + fmt_s(fc.hang_timeout_s) + ", up to " +
                   std::to_string(fc.max_restarts) + " restarts" +
                   (min_ranks < full ? ", down to " + std::to_string(min_ranks) + " ranks" : "") +
                   ")");
  // A continued job (the same command run again) numbers its attempts on.
  const int first_attempt = int(json_int_or(read_job(plan_.run_dir), "attempt", -1)) + 1;
  for (int attempt = first_attempt;; ++attempt) {
    const bool resume = has_checkpoints(plan_.run_dir);
    write_job_state("running", attempt, world);
    AttemptResult r = run_attempt(attempt, world, accum, resume);
    if (r.outcome == Outcome::kFinished) {
      // --stop-at ends a job early on purpose: it is not finished.
      if (r.step_reached < plan_.config.train.steps) {
        write_job_state("stopped", attempt, world);
        events_.emit("stopped", {{"attempt", attempt}, {"step", r.step_reached}},
                     "stopped at step " + std::to_string(r.step_reached) + " (--stop-at)");
        return 0;
      }
      write_job_state("finished", attempt, world);
      events_.emit("finished",
                   {{"attempt", attempt}, {"world", world}, {"restarts", restarts},
                    {"step", r.step_reached}},
                   "job finished" + (restarts ? " after " + std::to_string(restarts) +
                                                    (restarts == 1 ? " restart" : " restarts")
                                              : std::string()));
      return 0;
    }
    if (r.outcome == Outcome::kPreempted) {
      write_job_state("preempted", attempt, world);
      const int64_t at = newest_valid_step();
      events_.emit("preempted",
                   {{"attempt", attempt}, {"clean", r.clean_stop}, {"checkpoint_step", at}},
                   std::string(r.clean_stop ? "stopped after checkpointing"
                                            : "killed before every rank checkpointed") +
                       "; newest checkpoint: step " + std::to_string(at) +
                       "; run the same command again to continue");
      return 3;
    }
    if (r.outcome == Outcome::kBadInput) {
      write_job_state("failed", attempt, world);
      events_.emit("bad_input", {{"attempt", attempt}, {"message", r.message}},
                   "the job stopped on bad input (exit 2); not restarting");
      return 2;
    }
    // A failure: record it, then relaunch (or give up).
    const int64_t resume_step = newest_valid_step();
    const int64_t lost = std::max<int64_t>(0, r.step_reached - resume_step);
    history.push_back(r.what + " at step " + std::to_string(r.step_reached));
    json culprits = r.culprits;
    events_.emit("failure",
                 {{"attempt", attempt},
                  {"what", r.what},
                  {"ranks", culprits},
                  {"phase", phase_name(r.phase)},
                  {"step", r.step_reached},
                  {"resume_step", resume_step},
                  {"steps_lost", lost},
                  {"detect_s", r.detect_s},
                  {"message", r.message}},
                 r.message + " [detected after " + fmt_s(r.detect_s) + "; " +
                     std::to_string(lost) + " steps since checkpoint step " +
                     std::to_string(resume_step) + " lost]");
    ++failures_here;
    if (restarts >= fc.max_restarts) {
      write_job_state("failed", attempt, world);
      std::string list;
      for (size_t i = 0; i < history.size(); ++i)
        list += (i ? "; " : "") + std::to_string(i + 1) + ". " + history[i];
      events_.emit("gave_up", {{"attempts", attempt + 1}, {"checkpoint_step", resume_step}},
                   "giving up after " + std::to_string(restarts) + " restarts (fault.max_restarts = " +
                       std::to_string(fc.max_restarts) + "): " + list +
                       ". The newest valid checkpoint is step " + std::to_string(resume_step) +
                       "; fix the cause and run the same command to continue");
      return kExitGaveUp;
    }
    // Elastic fallback: after shrink_after failures at this size, the largest
    // smaller world that keeps the global batch (world x accum) whole.
    if (world > min_ranks && failures_here >= fc.shrink_after) {
      const int total = world * accum;
      auto pow2 = [](int x) { return x > 0 && (x & (x - 1)) == 0; };
      for (int w = world - 1; w >= min_ranks; --w) {
        if (total % w != 0) continue;
        if (plan_.config.dist.reproducible && (!pow2(w) || !pow2(total / w))) continue;
        events_.emit("shrink", {{"from", world}, {"to", w}, {"grad_accum", total / w}},
                     std::to_string(failures_here) + " failures at " + std::to_string(world) +
                         " ranks: continuing on " + std::to_string(w) + " ranks with grad_accum " +
                         std::to_string(total / w) + " (same global batch)");
        world = w;
        accum = total / w;
        failures_here = 0;
        break;
      }
    }
    ++restarts;
    const double backoff = std::min(60.0, fc.restart_backoff_s * std::pow(2.0, restarts - 1));
    events_.emit("restart",
                 {{"attempt", attempt + 1}, {"world", world}, {"backoff_s", backoff},
                  {"resume_step", resume_step}},
                 "restart " + std::to_string(restarts) + "/" + std::to_string(fc.max_restarts) +
                     " in " + fmt_s(backoff) + " from checkpoint step " +
                     std::to_string(resume_step) + " on " + std::to_string(world) + " ranks");
    recovery_ = Recovery{r.detected_at, r.step_reached, resume_step};
    const int handled = g_signals;
    const double until = mono_s() + backoff;
    while (mono_s() < until && g_signals == handled)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (g_signals != handled) {
      write_job_state("preempted", attempt, world);
      events_.emit("preempted", {{"attempt", attempt}, {"clean", true}, {"checkpoint_step", resume_step}},
                   "signal received while waiting to restart; newest checkpoint: step " +
                       std::to_string(resume_step) + "; run the same command again to continue");
      return 3;
    }
  }
}

// The newest runs/<name>-* the supervisor left unfinished (job.json state not
// "finished") that holds a checkpoint: "run the same command again" continues it.
std::string newest_unfinished_run(const std::string& name) {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (auto it = fs::directory_iterator("runs", ec); !ec && it != fs::end(it); it.increment(ec)) {
    const std::string base = it->path().filename().string();
    if (base.rfind(name + "-", 0) != 0 || !has_checkpoints(it->path().string())) continue;
    const json j = read_job(it->path().string());
    if (j.is_object() && json_string_or(j, "state", "") != "finished") dirs.push_back(it->path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs.empty() ? "" : dirs.back();
}

}  // namespace

Result<int> supervise(const SuperviseOptions& opt) {
  // Which run: the one named, the newest unfinished one of this config's name
  // (the same command run again), or a new one.
  RunRequest req = opt.request;
  if (req.run_dir.empty() && !req.resume) {
    auto named = load_config(req.config_path, req.overrides);
    if (!named) return named.status();
    if (named->run.dir.empty()) {
      req.run_dir = newest_unfinished_run(named->run.name);
      if (!req.run_dir.empty())
        std::fprintf(stderr, "[supervisor] continuing the unfinished run %s\n",
                     req.run_dir.c_str());
    }
  }
  if (!opt.launch.hostfile.empty())
    CRUCIBLE_RETURN_IF_ERROR(check_hostfile(opt.launch.hostfile, opt.launch.ranks));
  if (!req.run_dir.empty()) req.resume = has_checkpoints(req.run_dir);
  auto plan = plan_run(req);
  if (!plan) return plan.status();
  // All ranks on this machine (no hostfile): what they need together must fit
  // before any of them starts.
  if (opt.launch.hostfile.empty())
    CRUCIBLE_RETURN_IF_ERROR(check_memory_fits(estimate_memory(plan->config, opt.launch.ranks, 0),
                                               opt.launch.ranks, available_memory()));
  CRUCIBLE_RETURN_IF_ERROR(check_memory_budget(plan->config, opt.launch.ranks));
  const std::string run = plan->run_dir;  // a copy: the plan moves into the Supervisor
  // The supervisor owns the run directory for the job's whole life (its ranks
  // take only the attempt lock); nothing is written before it holds it.
  DirLock owner;
  CRUCIBLE_RETURN_IF_ERROR(owner.acquire(run, kOwnerLock, "crucible launch", 0, kRunDirHint));
  {
    if (json_string_or(read_job(run), "state", "") == "finished") {
      // Finished at its train.steps; a relaunch asking for more continues it.
      auto found = ckpt::find_latest_valid(run + "/ckpt");
      const int64_t done = found ? found->step : 0;
      if (done >= plan->config.train.steps) {
        std::fprintf(stderr,
                     "[supervisor] %s has finished at step %lld (train.steps = %lld); nothing to "
                     "do (--set train.steps=N with N > %lld trains it further)\n",
                     run.c_str(), (long long)done, (long long)plan->config.train.steps, (long long)done);
        return 0;
      }
      std::fprintf(stderr, "[supervisor] %s finished at step %lld; continuing to train.steps = %lld\n",
                   run.c_str(), (long long)done, (long long)plan->config.train.steps);
    }
  }
  // Orphaned ranks (their mpirun killed) are re-parented here and reaped.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  struct sigaction sa {}, old_int{}, old_term{};
  sa.sa_handler = on_supervisor_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  g_signals = 0;
  Supervisor sup(opt, std::move(*plan));
  Result<int> code = sup.run();
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  // A fresh job its ranks refused as bad input leaves nothing behind (the
  // directory was made here, for the lock; no step ran).
  if (code && *code == 2 && owner.created_dir() && !has_checkpoints(run)) {
    std::error_code rm;
    fs::remove_all(run, rm);
  }
  return code;
}

}  // namespace crucible::runtime
