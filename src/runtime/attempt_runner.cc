#include "runtime/attempt_runner.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/clock.h"
#include "core/file_io.h"
#include "core/process.h"
#include "runtime/hang_diagnosis.h"
#include "runtime/heartbeat.h"
#include "runtime/launcher.h"
#include "runtime/launcher_stderr.h"
#include "runtime/reach.h"
#include "runtime/slurm.h"
#include "runtime/stop_signals.h"

namespace crucible::runtime {

using nlohmann::json;

namespace {

double mono_s() { return now_ns() * 1e-9; }  // the one monotonic clock (core/clock.h)

// How often the supervisor tells its ranks it is there; a rank on another
// host that hears nothing for fault.heartbeat_window_s x 3 (at least 10 s)
// fences itself (exits), so a host cut off from its supervisor stops
// writing into a run that is continuing without it.
constexpr double kAckInterval = 0.5;

}  // namespace

Status AttemptRunner::open() {
  sock_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock_ < 0) return Status::io("[launch] socket: " + errno_str());
  host_ = host_name();
  // Where ranks send their heartbeats: loopback on one machine; with a
  // hostfile the address this machine has towards the other hosts (its host
  // name may resolve to a loopback address, 127.0.1.1 on a stock Debian).
  // Under Slurm on several nodes the ranks find this one by its name.
  const char* nodes = std::getenv("SLURM_JOB_NUM_NODES");
  const bool slurm_far = !slurm_job_id().empty() && nodes && std::atoi(nodes) > 1;
  const bool far = !opt_.launch.hostfile.empty() || slurm_far;
  reach_ = slurm_far ? host_ : "127.0.0.1";
  if (!opt_.launch.hostfile.empty()) {
    reach_ = address_facing(hostfile_hosts(opt_.launch.hostfile));
    if (reach_.empty()) reach_ = host_;
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = far ? htonl(INADDR_ANY) : htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (::bind(sock_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return Status::io("[launch] binding the heartbeat socket: " + errno_str());
  // Room for every beat between two polls even when steps take microseconds.
  int rcvbuf = 8 << 20;
  ::setsockopt(sock_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  enable_send_errors(sock_);
  socklen_t len = sizeof a;
  ::getsockname(sock_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  return Status::ok();
}

// Reads every datagram waiting. Beats of another attempt are dropped: the
// ranks of a killed attempt may have sent some just before they died, and
// they would read as this attempt's ranks (and then as dead ones).
void AttemptRunner::drain(double now) {
  char buf[1024];
  for (;;) {
    sockaddr_storage from{};
    socklen_t len = sizeof from;
    ssize_t n = ::recvfrom(sock_, buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &len);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) continue;  // a send's error, reported once
    if (n <= 0) break;
    Beat b;
    if (!decode(std::string(buf, size_t(n)), b)) continue;
    if (b.attempt != attempt_ || b.rank < 0 || b.rank >= int(ranks_.size())) continue;
    RankState& r = ranks_[size_t(b.rank)];
    // A pipeline action is progress too (it does not count in seq).
    if (!r.seen || b.seq != r.last.seq || b.step != r.last.step || b.op != r.last.op ||
        b.micro != r.last.micro || b.chunk != r.last.chunk)
      r.last_change = now;
    r.seen = true;
    r.local = b.host == host_;
    r.last = b;
    r.last_beat = now;
    addrs_[size_t(b.rank)] = from;
    if (b.type == "exit") {
      r.exited = true;
      r.code = b.code;
      r.message = b.message;
    }
  }
  // Acks that came back refused: the host answered for a rank whose process
  // is gone (kept: the host's kernel answers only about once a second).
  for (const sockaddr_storage& dest : take_send_errors(sock_))
    for (size_t k = 0; k < addrs_.size(); ++k)
      if (ranks_[k].seen && same_endpoint(dest, addrs_[k])) refused_at_[k] = now;
}

void AttemptRunner::send_to_ranks(const char* msg) {
  for (size_t i = 0; i < ranks_.size(); ++i)
    if (ranks_[i].seen && !ranks_[i].exited)
      ::sendto(sock_, msg, std::strlen(msg), MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&addrs_[i]),
               sizeof(sockaddr_in));
}

std::vector<Reach> AttemptRunner::probe(const std::vector<int>& ranks) {
  std::vector<sockaddr_storage> addrs;
  for (int k : ranks) addrs.push_back(addrs_[size_t(k)]);
  std::vector<Reach> answers = probe_ranks(sock_, addrs, kReachTimeout_s);
  std::vector<Reach> out(ranks_.size(), Reach::kUnknown);
  drain(mono_s());  // errors that came in meanwhile
  for (size_t i = 0; i < ranks.size(); ++i) {
    const size_t k = size_t(ranks[i]);
    // A refusal since the rank's last beat answers as well as the probe's own.
    out[k] = refused_at_[k] > ranks_[k].last_beat ? Reach::kAnswers : answers[i];
  }
  return out;
}

void AttemptRunner::annotate_hosts(AttemptResult& r) const {
  for (HostLoss& h : r.hosts)
    if (!h.ranks.empty() && ranks_[size_t(h.ranks[0])].seen) h.address = address_text(addrs_[size_t(h.ranks[0])]);
}

void AttemptRunner::kill_job(pid_t child) {
  for (const RankState& r : ranks_)
    if (r.seen && r.local) ::kill(pid_t(r.last.pid), SIGKILL);
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
    for (const RankState& r : ranks_)
      if (r.seen && r.local && process_alive(pid_t(r.last.pid))) any = true;
    if (!any || mono_s() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

AttemptResult AttemptRunner::run(int attempt, const AttemptLayout& at, bool resume,
                                 std::optional<Recovery>& recovery,
                                 const std::function<bool(std::string& why)>& grow_possible) {
  const RunRequest& req = opt_.request;
  std::vector<std::string> args = opt_.command;
  if (args.empty()) {
    args = {"train"};
    if (!req.config_path.empty()) args.push_back(req.config_path);
    for (const auto& o : req.overrides) args.insert(args.end(), {"--set", o});
    if (at.accum != plan_.config.train.grad_accum)
      args.insert(args.end(), {"--set", "train.grad_accum=" + std::to_string(at.accum)});
  }
  args.insert(args.end(), {"--run-dir", plan_.run_dir});
  if (resume) args.push_back("--resume");
  if (opt_.stop_at > 0) args.insert(args.end(), {"--stop-at", std::to_string(opt_.stop_at)});
  if (opt_.metrics_port > 0)
    args.insert(args.end(), {"--metrics-port", std::to_string(opt_.metrics_port), "--metrics-bind",
                             opt_.metrics_bind});

  const FaultConfig& fc = plan_.config.fault;
  ::setenv(kSupervisorEnv, (reach_ + ":" + std::to_string(port_)).c_str(), 1);
  ::setenv(kSupervisorPidEnv, std::to_string(::getpid()).c_str(), 1);
  ::setenv(kSupervisorHostEnv, host_.c_str(), 1);
  ::setenv(kAttemptEnv, std::to_string(attempt).c_str(), 1);
  ::setenv(kFenceEnv, std::to_string(std::max(10.0, 3 * fc.heartbeat_window_s)).c_str(), 1);
  LaunchSpec spec = opt_.launch;
  spec.ranks = at.world;
  spec.hostfile = at.hostfile;
  spec.env_to_forward = {kSupervisorEnv, kSupervisorPidEnv, kSupervisorHostEnv, kAttemptEnv, kFenceEnv};
  std::vector<std::string> argv = launcher_command(spec, self_executable(), args);
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
  std::fprintf(stderr, "[launch] %s\n", line.c_str());
  std::fflush(stderr);

  ranks_.assign(size_t(at.world), RankState{});
  addrs_.assign(size_t(at.world), sockaddr_storage{});
  refused_at_.assign(size_t(at.world), -1);
  attempt_ = attempt;
  AttemptResult res;
  const double start = mono_s();
  // mpirun's stderr (its ranks' lines among it) comes through here, without
  // the banners it puts around a rank's exit code: a refusal the ranks found
  // reaches the user as their one line (the outcome is reported below).
  StderrRelay relay;
  const bool relayed = relay.open().is_ok();
  pid_t child = ::fork();
  if (child == 0) {
    if (relayed) ::dup2(relay.write_fd(), STDERR_FILENO);
    ::setpgid(0, 0);  // Ctrl-C on the terminal reaches the supervisor only
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // and the job dies with the supervisor
    for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGHUP}) ::signal(sig, SIG_DFL);
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
  relay.start();
  for (auto& r : ranks_) r.last_change = start;

  int stops_handled = SupervisorSignals::stops();
  bool announced = false;  // ranks_up emitted
  bool stopping = false;
  double stop_deadline = 0, last_ack = 0;
  grow_pending_ = false;
  auto fail = [&](AttemptResult r) {
    annotate_hosts(r);
    kill_job(child);
    return r;
  };
  auto stop = [&](double now) {
    stopping = true;
    stop_deadline = now + fc.stop_grace_s;
    send_to_ranks("{\"t\":\"stop\"}");
  };

  for (;;) {
    pollfd p{sock_, POLLIN, 0};
    ::poll(&p, 1, 20);
    double now = mono_s();
    drain(now);
    if (now - last_ack >= kAckInterval) {
      send_to_ranks("{\"t\":\"ok\"}");
      last_ack = now;
    }

    if (!announced && std::all_of(ranks_.begin(), ranks_.end(), [](const RankState& r) { return r.seen; })) {
      announced = true;
      json pids = json::array(), hosts = json::array();
      std::string list;
      for (const RankState& r : ranks_) {
        pids.push_back(r.last.pid);
        hosts.push_back(r.last.host);
        list += (list.empty() ? "" : " ") + std::to_string(r.last.pid);
      }
      events_.emit("ranks_up", {{"attempt", attempt}, {"world", at.world}, {"pids", pids}, {"hosts", hosts}},
                   "attempt " + std::to_string(attempt) + ": " + std::to_string(at.world) + " ranks up (pids " +
                       list + ") after " + fmt_s(now - start));
    }
    // Recovery after an earlier failure: back to training, then back to where it failed.
    if (recovery) {
      const int64_t s = step_reached(ranks_);
      if (!recovery->resumed && s > recovery->resume_step) {
        recovery->resumed = true;
        events_.emit("recovered", {{"attempt", attempt}, {"recover_s", now - recovery->detected_at}, {"step", s}},
                     "attempt " + std::to_string(attempt) + " is training again (step " + std::to_string(s) +
                         ") " + fmt_s(now - recovery->detected_at) + " after the failure was detected");
      }
      if (!recovery->caught_up && s >= recovery->failed_step) {
        recovery->caught_up = true;
        events_.emit("caught_up", {{"attempt", attempt}, {"catchup_s", now - recovery->detected_at}, {"step", s}},
                     "back at step " + std::to_string(recovery->failed_step) + " " +
                         fmt_s(now - recovery->detected_at) + " after the failure was detected");
      }
    }

    int st = 0;
    if (::waitpid(child, &st, WNOHANG) == child) {
      drain(mono_s());
      while (::waitpid(-1, &st, WNOHANG) > 0) {
      }
      const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      std::vector<int> unreported;
      for (size_t i = 0; i < ranks_.size(); ++i)
        if (ranks_[i].seen && !ranks_[i].exited) unreported.push_back(int(i));
      // Asked whatever the code: mpirun can end with 0 when another host's ranks were killed.
      const std::vector<Reach> reach = unreported.empty() ? std::vector<Reach>{} : probe(unreported);
      const int64_t target = opt_.stop_at > 0 ? opt_.stop_at : plan_.config.train.steps;
      res = classify_end(ranks_, code, target, stopping, reach, mono_s());
      annotate_hosts(res);
      return res;
    }

    // A local rank whose process is gone without reporting its exit died
    // (killed, crashed). Checked every tick, before mpirun reacts to it.
    for (size_t i = 0; i < ranks_.size(); ++i) {
      const RankState& r = ranks_[i];
      if (!r.seen || r.exited || !r.local || process_alive(pid_t(r.last.pid))) continue;
      drain(now);  // its exit report may have just arrived
      if (r.exited) continue;
      AttemptResult d;
      d.what = "died";
      d.culprits = {int(i)};
      d.message = "rank " + std::to_string(i) + " (pid " + std::to_string(r.last.pid) + ") died in " +
                  describe_position(view_of(int(i), r, now)) + " (killed or crashed; no exit report)";
      d.phase = r.last.phase;
      d.step_reached = step_reached(ranks_);
      d.detected_at = now;
      d.detect_s = now - r.last_beat;
      d.hosts = group_by_host(ranks_, d.culprits, {});
      return fail(d);
    }

    // Silence: heartbeats that stopped crossing the network (a rank on
    // another host gone, the host or the link to it down). Its address is
    // asked before anything is concluded.
    if (std::vector<int> silent = silent_ranks(ranks_, now, fc.heartbeat_window_s); !silent.empty()) {
      const std::vector<Reach> reach = probe(silent);
      now = mono_s();
      drain(now);
      silent = silent_ranks(ranks_, now, fc.heartbeat_window_s);  // a late beat clears it
      if (!silent.empty()) return fail(classify_silence(ranks_, silent, reach, fc.heartbeat_window_s, now));
    }

    // Hang: a rank whose position has not changed for the timeout.
    if (!stopping) {
      if (const int k = first_hung(ranks_, now, fc.setup_timeout_s, fc.hang_timeout_s); k >= 0) {
        const RankState& r = ranks_[size_t(k)];
        const bool setup = !r.seen || r.last.phase == Phase::kSetup;
        std::vector<RankView> views;
        for (size_t i = 0; i < ranks_.size(); ++i) views.push_back(view_of(int(i), ranks_[i], now));
        const HangDiagnosis d = diagnose_hang(views);
        AttemptResult h;
        h.what = "hang";
        h.culprits = d.culprits;
        h.message = "hang: no progress for " + fmt_s(now - r.last_change) + " (limit " +
                    fmt_s(setup ? fc.setup_timeout_s : fc.hang_timeout_s) + "): " + d.message;
        h.phase = d.culprits.empty() ? r.last.phase : ranks_[size_t(d.culprits[0])].last.phase;
        h.step_reached = step_reached(ranks_);
        h.detected_at = now;
        h.detect_s = now - r.last_change;
        h.hosts = group_by_host(ranks_, h.culprits, {});
        return fail(h);
      }
    }

    // Growing back (SIGHUP): a checkpoint at the next step boundary, then
    // the next attempt at full size (AttemptRunner::run).
    if (SupervisorSignals::grows() != grows_handled_) {
      grows_handled_ = SupervisorSignals::grows();
      std::string why;
      if (at.world >= opt_.launch.ranks)
        why = "the job already runs on all " + std::to_string(at.world) + " ranks";
      if (why.empty() && !stopping && grow_possible(why)) {
        grow_pending_ = true;
        stop(now);
        events_.emit("grow_requested", {{"attempt", attempt}, {"from", at.world}, {"to", opt_.launch.ranks}},
                     "asked to grow: the ranks checkpoint at the next step boundary, then the job continues on " +
                         std::to_string(opt_.launch.ranks) + " ranks");
      } else if (!why.empty()) {
        events_.emit("grow_refused", {{"attempt", attempt}, {"why", why}}, "not growing: " + why);
      }
    }
    // Preemption: the first signal asks the ranks to checkpoint and exit, a
    // second one (or the grace period running out) kills the job.
    if (SupervisorSignals::stops() != stops_handled) {
      stops_handled = SupervisorSignals::stops();
      grow_pending_ = false;  // a stop wins over a grow in progress
      if (!stopping) {
        stop(now);
        events_.emit("stop_requested", {{"attempt", attempt}, {"step", step_reached(ranks_)}},
                     "signal received: the ranks checkpoint at the next step boundary and exit "
                     "(again to kill them now)");
      } else {
        stop_deadline = now;  // killed below
      }
    }
    if (stopping) {
      send_to_ranks("{\"t\":\"stop\"}");  // ranks that were still starting up get it too
      if (now >= stop_deadline) {
        res.step_reached = step_reached(ranks_);
        kill_job(child);
        res.outcome = Outcome::kPreempted;
        res.clean_stop = false;
        return res;
      }
    }
  }
}

}  // namespace crucible::runtime
