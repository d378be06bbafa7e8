#include "runtime/faults.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <string>

#include "ckpt/checkpoint.h"
#include "core/allocator.h"

namespace crucible::runtime {

namespace {

bool parse_int(const std::string& s, int64_t& out) {
  char* end = nullptr;
  out = std::strtoll(s.c_str(), &end, 10);
  return !s.empty() && *end == '\0';
}

Result<InjectedFault> parse_one(const std::string& e) {
  auto bad = [&](const std::string& why) {
    return Status::invalid("[config] fault.inject: '" + e + "': " + why +
                           " (expected KIND@STEP[:rank=R][:file=F][:attempt=N|all], KIND one of "
                           "kill, kill_after_ckpt, hang, slow, leak, ckpt_write_error, ckpt_corrupt)");
  };
  InjectedFault f;
  auto at = e.find('@');
  if (at == std::string::npos) return bad("no @STEP");
  const std::string kind = e.substr(0, at);
  if (kind == "kill") f.kind = InjectedFault::Kind::kKill;
  else if (kind == "kill_after_ckpt") f.kind = InjectedFault::Kind::kKillAfterCkpt;
  else if (kind == "hang") f.kind = InjectedFault::Kind::kHang;
  else if (kind == "slow") f.kind = InjectedFault::Kind::kSlow;
  else if (kind == "leak") f.kind = InjectedFault::Kind::kLeak;
  else if (kind == "ckpt_write_error") f.kind = InjectedFault::Kind::kCkptWriteError;
  else if (kind == "ckpt_corrupt") f.kind = InjectedFault::Kind::kCkptCorrupt;
  else return bad("unknown kind '" + kind + "'");
  const bool ckpt = f.kind == InjectedFault::Kind::kCkptWriteError ||
                    f.kind == InjectedFault::Kind::kCkptCorrupt;
  f.file = f.kind == InjectedFault::Kind::kCkptWriteError ? "optimizer.safetensors"
                                                           : "model.safetensors";
  std::string rest = e.substr(at + 1);
  std::vector<std::string> parts;
  for (size_t pos = 0;;) {
    size_t colon = rest.find(':', pos);
    parts.push_back(rest.substr(pos, colon - pos));
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  int64_t v = 0;
  if (!parse_int(parts[0], v) || v < 1) return bad("STEP must be a step number >= 1");
  f.step = v;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    auto eq = p.find('=');
    std::string key = p.substr(0, eq), val = eq == std::string::npos ? "" : p.substr(eq + 1);
    if (key == "rank") {  // checkpoint faults: the rank that writes the file (a part's, sharded)
      if (!parse_int(val, v) || v < 0) return bad("rank must be >= 0");
      f.rank = int(v);
    } else if (key == "ms" && f.kind == InjectedFault::Kind::kSlow) {
      if (!parse_int(val, v) || v < 0) return bad("ms must be >= 0");
      f.ms = int(v);
    } else if (key == "kb" && f.kind == InjectedFault::Kind::kLeak) {
      if (!parse_int(val, v) || v < 1) return bad("kb must be >= 1");
      f.kb = int(v);
    } else if (key == "file" && ckpt && !val.empty()) {
      f.file = val;
    } else if (key == "attempt") {
      if (val == "all") f.attempt = -1;
      else if (parse_int(val, v) && v >= 0) f.attempt = int(v);
      else return bad("attempt must be a number or 'all'");
    } else {
      return bad("'" + p + "' is not an option of " + kind);
    }
  }
  return f;
}

}  // namespace

Result<std::vector<InjectedFault>> parse_faults(const FaultConfig& cfg) {
  std::vector<InjectedFault> out;
  for (const std::string& e : cfg.inject) {
    auto f = parse_one(e);
    if (!f) return f.status();
    out.push_back(*f);
  }
  return out;
}

int current_attempt() {
  const char* a = std::getenv("CRUCIBLE_ATTEMPT");
  return a ? std::atoi(a) : 0;
}

Status FaultInjector::arm(const FaultConfig& cfg, int rank) {
  auto all = parse_faults(cfg);
  if (!all) return all.status();
  const int attempt = current_attempt();
  mine_.clear();
  for (const InjectedFault& f : *all) {
    if (f.attempt != -1 && f.attempt != attempt) continue;
    switch (f.kind) {
      case InjectedFault::Kind::kCkptWriteError:
        if (rank == f.rank) ckpt::inject_checkpoint_write_fault(f.step, f.file);
        break;
      case InjectedFault::Kind::kCkptCorrupt:
        if (rank == f.rank) ckpt::inject_checkpoint_corruption(f.step, f.file);
        break;
      default:
        if (f.rank == rank) mine_.push_back(f);
    }
  }
  return Status::ok();
}

void FaultInjector::before_forward(int64_t step) const {
  for (const InjectedFault& f : mine_) {
    if (f.kind == InjectedFault::Kind::kHang && f.step == step)
      for (;;) ::pause();  // no progress until killed
    if (f.kind == InjectedFault::Kind::kSlow && step >= f.step)
      std::this_thread::sleep_for(std::chrono::milliseconds(f.ms));
    if (f.kind == InjectedFault::Kind::kLeak && step >= f.step)
      leaked_.push_back(Allocator::global().allocate(size_t(f.kb) * 1024, "fault.leak"));
  }
}

void FaultInjector::before_backward(int64_t step) const {
  for (const InjectedFault& f : mine_)
    if (f.kind == InjectedFault::Kind::kKill && f.step == step) ::raise(SIGKILL);
}

bool FaultInjector::kills_after_checkpoint(int64_t step) const {
  for (const InjectedFault& f : mine_)
    if (f.kind == InjectedFault::Kind::kKillAfterCkpt && f.step == step) return true;
  return false;
}

void FaultInjector::after_checkpoint(int64_t step) const {
  if (kills_after_checkpoint(step)) ::raise(SIGKILL);
}

}  // namespace crucible::runtime
