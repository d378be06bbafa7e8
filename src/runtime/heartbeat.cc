#include "runtime/heartbeat.h"

#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "core/clock.h"
#include "core/process.h"
#include "core/threads.h"
#include "core/trace.h"

namespace crucible::runtime {

namespace {

constexpr const char* kPhaseNames[] = {"setup",     "data wait", "forward",    "backward",
                                       "gradient allreduce",    "optimizer", "parameter allgather",
                                       "step-end sync",         "evaluation", "checkpoint", "done",
                                       "pipeline schedule"};

// The process's heartbeat. Allocated once and never destroyed: the thread may
// still run while static destructors do at exit.
struct State {
  std::once_flag started;
  std::atomic<int> rank{-1}, world{0};
  std::atomic<int64_t> step{0};
  std::atomic<int> phase{int(Phase::kSetup)};
  std::atomic<uint64_t> seq{0};
  // heartbeat_action's, packed: op + 1 (0: none) << 48 | micro << 32 | chunk << 16 | stage.
  std::atomic<uint64_t> action{0};
  std::atomic<bool> stop{false}, quit{false};
  int fd = -1;
  int attempt = 0;
  pid_t supervisor_pid = 0;
  bool supervisor_local = false;
  double fence_s = 0;  // on another host: exit after this long without a word (0: never)
  std::string host;
  std::mutex send_mu;
  std::thread thread;
};

State* state() {
  static State* s = [] {
    auto* st = new State;
    const char* addr = std::getenv(kSupervisorEnv);
    if (!addr) return st;
    std::string a = addr;
    auto colon = a.rfind(':');
    if (colon == std::string::npos) return st;
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    if (::getaddrinfo(a.substr(0, colon).c_str(), a.substr(colon + 1).c_str(), &hints, &res) != 0)
      return st;
    int fd = ::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
    ::freeaddrinfo(res);
    st->fd = fd;
    if (const char* at = std::getenv(kAttemptEnv)) st->attempt = std::atoi(at);
    st->host = host_name();
    if (const char* p = std::getenv(kSupervisorPidEnv)) st->supervisor_pid = pid_t(std::atoll(p));
    const char* sh = std::getenv(kSupervisorHostEnv);
    st->supervisor_local = sh && st->host == sh && st->supervisor_pid > 0;
    if (const char* f = std::getenv(kFenceEnv); f && !st->supervisor_local) st->fence_s = std::atof(f);
    return st;
  }();
  return s;
}

Beat current(State& s, const char* type) {
  Beat b;
  b.type = type;
  b.rank = s.rank.load();
  b.world = s.world.load();
  b.attempt = s.attempt;
  b.pid = ::getpid();
  b.host = s.host;
  b.step = s.step.load(std::memory_order_relaxed);
  b.phase = Phase(s.phase.load(std::memory_order_relaxed));
  b.seq = s.seq.load(std::memory_order_relaxed);
  if (const uint64_t a = s.action.load(std::memory_order_relaxed)) {
    b.op = int(a >> 48) - 1;
    b.micro = int((a >> 32) & 0xffff);
    b.chunk = int((a >> 16) & 0xffff);
    b.stage = int(a & 0xffff);
  }
  return b;
}

void send(State& s, const Beat& b) {
  std::string text = encode(b);
  std::lock_guard<std::mutex> lock(s.send_mu);
  // Best effort: a lost beat is covered by the next one.
  (void)::send(s.fd, text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

void run(State* s) {
  block_stop_signals_in_this_thread();
  char buf[512];
  auto heard = std::chrono::steady_clock::now();
  while (!s->quit.load()) {
    send(*s, current(*s, "hb"));
    pollfd p{s->fd, POLLIN, 0};
    if (::poll(&p, 1, int(kBeatInterval.count())) > 0) {
      for (ssize_t n; (n = ::recv(s->fd, buf, sizeof buf - 1, MSG_DONTWAIT)) > 0;) {
        heard = std::chrono::steady_clock::now();
        if (std::string(buf, size_t(n)).find("\"stop\"") != std::string::npos) s->stop.store(true);
      }
    }
    const double quiet = std::chrono::duration<double>(std::chrono::steady_clock::now() - heard).count();
    if (s->fence_s > 0 && quiet > s->fence_s) {
      std::fprintf(stderr,
                   "[heartbeat] rank %d on %s: no word from the supervisor for %.1f s (the link to it, or "
                   "it, is gone); exiting so that the job can continue without this host\n",
                   s->rank.load(), s->host.c_str(), quiet);
      std::fflush(stderr);
      ::_exit(kExitOrphaned);
    }
    if (s->supervisor_local && !process_alive(s->supervisor_pid)) {
      std::fprintf(stderr, "[heartbeat] rank %d: the supervisor (pid %d) is gone; exiting\n",
                   s->rank.load(), int(s->supervisor_pid));
      std::fflush(stderr);
      ::_exit(kExitOrphaned);
    }
  }
}

}  // namespace

const char* phase_name(Phase p) {
  int i = int(p);
  return i >= 0 && i <= int(Phase::kPipeline) ? kPhaseNames[i] : "unknown";
}

bool phase_is_collective(Phase p) {
  return p == Phase::kReduce || p == Phase::kGather || p == Phase::kSync || p == Phase::kEval ||
         p == Phase::kCheckpoint || p == Phase::kPipeline;
}

void heartbeat_start(int rank, int world) {
  State* s = state();
  s->rank.store(rank);
  s->world.store(world);
  if (s->fd < 0) return;
  std::call_once(s->started, [s] { s->thread = std::thread(run, s); });
}

void heartbeat_phase(int64_t step, Phase p) {
  State* s = state();
  s->step.store(step, std::memory_order_relaxed);
  s->phase.store(int(p), std::memory_order_relaxed);
  s->seq.fetch_add(1, std::memory_order_relaxed);
  s->action.store(0, std::memory_order_relaxed);
  // Sent at once as well: a rank killed between two periodic beats must have
  // told where it was (a few µs per phase, ~10 phases per step).
  if (s->fd >= 0 && s->rank.load(std::memory_order_relaxed) >= 0) send(*s, current(*s, "hb"));
}

void heartbeat_action(int op, int micro, int chunk, int stage) {
  auto field = [](int x) { return uint64_t(uint16_t(x)); };
  state()->action.store((uint64_t(op + 1) << 48) | field(micro) << 32 | field(chunk) << 16 | field(stage),
                        std::memory_order_relaxed);
}

bool heartbeat_stop_requested() { return state()->stop.load(std::memory_order_relaxed); }

void heartbeat_exit(int code, const std::string& message) {
  State* s = state();
  if (s->fd < 0 || s->rank.load() < 0) return;
  s->quit.store(true);
  if (s->thread.joinable()) s->thread.join();
  Beat b = current(*s, "exit");
  b.code = code;
  b.message = message.substr(0, 300);
  send(*s, b);
}

std::string encode(const Beat& b) {
  nlohmann::json j = {{"t", b.type},       {"rank", b.rank}, {"world", b.world},
                      {"attempt", b.attempt}, {"pid", b.pid}, {"host", b.host},
                      {"step", b.step},    {"phase", int(b.phase)}, {"seq", b.seq}};
  if (b.op >= 0) j["act"] = {b.op, b.micro, b.chunk, b.stage};
  if (b.type == "exit") {
    j["code"] = b.code;
    j["msg"] = b.message;
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool decode(const std::string& text, Beat& b) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  try {
    b.type = j.at("t").get<std::string>();
    b.rank = j.at("rank").get<int>();
    b.world = j.at("world").get<int>();
    b.attempt = j.at("attempt").get<int>();
    b.pid = j.at("pid").get<int64_t>();
    b.host = j.at("host").get<std::string>();
    b.step = j.at("step").get<int64_t>();
    int p = j.at("phase").get<int>();
    if (p < 0 || p > int(Phase::kPipeline)) return false;
    b.phase = Phase(p);
    b.seq = j.at("seq").get<uint64_t>();
    if (j.contains("act")) {
      const auto& a = j.at("act");
      if (!a.is_array() || a.size() != 4) return false;
      b.op = a[0].get<int>(), b.micro = a[1].get<int>(), b.chunk = a[2].get<int>(), b.stage = a[3].get<int>();
    }
    b.code = j.value("code", 0);
    b.message = j.value("msg", "");
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return true;
}

void PhaseMarker::enter(int64_t step, Phase p) {
  const int64_t now = now_ns();
  if (open_) trace::record_complete(name_, "phase", t0_, now);  // no-op when inactive
  heartbeat_phase(step, p);
  name_ = phase_name(p);
  t0_ = now;
  open_ = p != Phase::kSetup && p != Phase::kDone;
}

}  // namespace crucible::runtime
