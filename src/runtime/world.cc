#include "runtime/world.h"

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/process.h"
#include "core/trace.h"
#include "profile/trace_file.h"

namespace crucible::runtime {

namespace {

constexpr size_t kMessageBytes = 1024;

Status broadcast_string(comm::Comm& comm, std::string& s) {
  double len = double(s.size());
  CRUCIBLE_RETURN_IF_ERROR(comm.broadcast(&len, sizeof len, 0));
  s.resize(size_t(len));
  return comm.broadcast(s.data(), s.size(), 0);
}

// The first key (section.name) whose value differs, with both values.
std::string first_difference(const nlohmann::json& mine, const nlohmann::json& root) {
  for (const auto& [sec, keys] : root.items())
    for (const auto& [name, value] : keys.items()) {
      const nlohmann::json* other =
          mine.contains(sec) && mine[sec].contains(name) ? &mine[sec][name] : nullptr;
      if (!other || *other != value)
        return sec + "." + name + " = " + (other ? other->dump() : "(missing)") + ", rank 0 has " +
               value.dump();
    }
  return "";
}

// The first failing rank's status on every rank. everywhere: its message
// on every rank as it is (a verdict the ranks reached together); else on
// rank 0 only, naming the rank.
Status first_failure(comm::Comm& comm, const Status& local, bool everywhere) {
  if (comm.size() == 1) return local;
  char mine[kMessageBytes] = {};
  const int32_t code = int32_t(local.code());
  std::memcpy(mine, &code, sizeof code);
  std::strncpy(mine + sizeof code, local.message().c_str(), kMessageBytes - sizeof code - 1);
  std::vector<char> all(kMessageBytes * size_t(comm.size()));
  Status s = comm.allgather_bytes(mine, kMessageBytes, all.data());
  if (!s.is_ok()) return s;
  for (int r = 0; r < comm.size(); ++r) {
    const char* entry = all.data() + size_t(r) * kMessageBytes;
    int32_t c;
    std::memcpy(&c, entry, sizeof c);
    if (c == int32_t(Code::kOk)) continue;
    std::string msg = everywhere ? std::string(entry + sizeof c)
                      : comm.rank() != 0
                          ? ""
                          : (r == 0 ? "" : "[rank " + std::to_string(r) + "] ") + std::string(entry + sizeof c);
    return Status::error(Code(c), msg);
  }
  return Status::ok();
}

}  // namespace

Status agree(comm::Comm& comm, const Status& local) { return first_failure(comm, local, false); }

ckpt::VerifyShare verify_share(comm::Comm& comm) {
  ckpt::VerifyShare share;
  share.rank = comm.rank();
  share.ranks = comm.size();
  share.agree = [&comm](const Status& s) { return first_failure(comm, s, /*everywhere=*/true); };
  share.broadcast = [&comm](std::string& text) { return broadcast_string(comm, text); };
  return share;
}

Status agree_on_run(comm::Comm& comm, const nlohmann::json& config, std::string& run_dir) {
  if (comm.size() == 1) return Status::ok();
  CRUCIBLE_RETURN_IF_ERROR(broadcast_string(comm, run_dir));
  std::string root = config.dump();
  CRUCIBLE_RETURN_IF_ERROR(broadcast_string(comm, root));
  Status local;
  if (root != config.dump()) {
    local = Status::invalid(
        "[dist] rank " + std::to_string(comm.rank()) +
        "'s config differs from rank 0's: " + first_difference(config, nlohmann::json::parse(root)));
  }
  return agree(comm, local);
}

Status agree_on_config(comm::Comm& comm, Config& cfg, std::string& run_dir) {
  if (comm.size() == 1) return Status::ok();
  CRUCIBLE_RETURN_IF_ERROR(broadcast_string(comm, run_dir));
  cfg.run.dir = run_dir;
  return agree_on_run(comm, to_json(cfg), run_dir);
}

Status write_run_trace(comm::Comm& comm, const std::string& run) {
  const int rank = comm.rank();
  std::vector<trace::Event> events = trace::take_events();
  double any = events.empty() ? 0 : 1;
  CRUCIBLE_RETURN_IF_ERROR(comm.allreduce(&any, 1, comm::ReduceOp::kMax));
  if (any == 0) return Status::ok();
  const std::string mine = run + "/trace.rank" + std::to_string(rank) + ".json";
  CRUCIBLE_RETURN_IF_ERROR(agree(comm, profile::write_rank_trace(mine, rank, host_name(), events)));
  Status merged;
  if (rank == 0) {
    std::vector<std::string> parts;
    for (int r = 0; r < comm.size(); ++r) parts.push_back(run + "/trace.rank" + std::to_string(r) + ".json");
    merged = profile::merge_traces(parts, run + "/trace.json");
    if (merged)
      for (const auto& part : parts) std::filesystem::remove(part);
  }
  return agree(comm, merged);
}

}  // namespace crucible::runtime
