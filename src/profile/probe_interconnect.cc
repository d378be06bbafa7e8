// The interconnect probe: collectives through Comm and plain MPI, each
// validated, after the ping-pong of every pair (probe_pingpong.cc); see
// probe_interconnect.h for the schema.
#include "profile/probe_interconnect.h"
#include "profile/probe_interconnect_parts.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <set>
#include <thread>

#include "core/clock.h"
#include "comm/mpi_peer.h"

namespace crucible::profile {
namespace {

using comm::Comm;
using comm::ReduceOp;
using nlohmann::json;

using interconnect::allocate;
using interconnect::kMiB;
using interconnect::Mode;
using interconnect::mode_for;

constexpr float kPoison = -1.0f;  // never a fill value (those are 0..63)

long minor_faults() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

std::string format_bytes(double b) {
  char s[32];
  if (b >= kMiB && std::fmod(b, kMiB) == 0)
    std::snprintf(s, sizeof s, "%.0f MiB", b / kMiB);
  else if (b >= 1024 && std::fmod(b, 1024) == 0)
    std::snprintf(s, sizeof s, "%.0f KiB", b / 1024);
  else
    std::snprintf(s, sizeof s, "%.0f B", b);
  return s;
}

// ---- collectives ----

enum class Op { kAllreduce, kAllgather, kReduceScatter };
constexpr Op kOps[] = {Op::kAllreduce, Op::kAllgather, Op::kReduceScatter};

const char* op_name(Op op) {
  switch (op) {
    case Op::kAllreduce:
      return "allreduce";
    case Op::kAllgather:
      return "allgather";
    case Op::kReduceScatter:
      return "reduce_scatter";
  }
  return "?";
}

// Rank r's input element i: a small integer, so sums over ranks are exact.
float fill_value(int r, size_t i) {
  return static_cast<float>((31 * (i & 63) + 17 * (static_cast<size_t>(r) & 63)) & 63);
}

// The first wrong element a rank saw (index -1: none). Exchanged between ranks
// as raw bytes, hence trivially copyable.
struct Mismatch {
  int64_t index = -1;
  double got = 0, expected = 0;
};

// Every rank's Mismatch, turned into the entry's "valid": true or a message
// naming the first failing rank (the same on every rank).
Result<json> agree_on_validity(Comm& comm, const Mismatch& mine, const std::string& what) {
  std::vector<Mismatch> all(comm.size());
  CRUCIBLE_RETURN_IF_ERROR(comm.allgather_bytes(&mine, sizeof mine, all.data()));
  int failed = 0, first = -1;
  for (int r = 0; r < comm.size(); ++r)
    if (all[r].index >= 0 && failed++ == 0) first = r;
  if (failed == 0) return json(true);
  char s[256];
  std::snprintf(s, sizeof s, "%s: rank %d: element %" PRId64 " = %g, expected %g", what.c_str(),
                first, all[first].index, all[first].got, all[first].expected);
  std::string msg = s;
  if (failed > 1) msg += " (" + std::to_string(failed) + " ranks saw wrong elements)";
  return json(msg);
}

// The buffers of every size, allocated once at the largest and pre-faulted.
// in: the allreduce array / allgather piece / reduce_scatter input;
// out: the allgather output / reduce_scatter piece.
struct CollectiveBuffers {
  std::vector<float> in, out;
};

class CollectiveProbe {
 public:
  CollectiveProbe(Comm& comm, const Mode& mode, const InterconnectOptions& opt)
      : comm_(comm), mode_(mode), opt_(opt), n_(comm.size()), rank_(comm.rank()) {}

  // One op at every size: {"busbw_factor", "comm": [...], "mpi": [...]}.
  Result<json> run(Op op, CollectiveBuffers& buf) {
    json out = {{"busbw_factor", detail::busbw_factor(op_name(op), n_)},
                {"comm", json::array()},
                {"mpi", json::array()}};
    size_t last_total = 0;
    for (size_t nominal : detail::collective_sizes(mode_.max_bytes, mode_.size_factor)) {
      const size_t piece =
          op == Op::kAllreduce ? 0 : std::max<size_t>(1, nominal / sizeof(float) / n_);
      const size_t total =
          op == Op::kAllreduce ? std::max<size_t>(1, nominal / sizeof(float)) : piece * n_;
      if (total == last_total) continue;  // whole floats per rank: sizes may coincide
      last_total = total;
      for (bool mpi : {false, true}) {
        auto e = measure(op, mpi, piece, total, buf);
        if (!e) return e.status();
        out[mpi ? "mpi" : "comm"].push_back(std::move(e).value());
      }
    }
    return out;
  }

 private:
  Status call(Op op, bool mpi, size_t piece, size_t total, const std::vector<size_t>& counts,
              CollectiveBuffers& b) {
    switch (op) {
      case Op::kAllreduce:
        return mpi ? comm::mpi_peer_allreduce_sum(b.in.data(), total)
                   : comm_.allreduce(b.in.data(), total);
      case Op::kAllgather:
        return mpi ? comm::mpi_peer_allgather(b.in.data(), piece, b.out.data())
                   : comm_.allgather(b.in.data(), b.out.data(), counts);
      case Op::kReduceScatter:
        return mpi ? comm::mpi_peer_reduce_scatter(b.in.data(), b.out.data(), piece)
                   : comm_.reduce_scatter(b.in.data(), b.out.data(), counts);
    }
    return Status::internal("[profile] interconnect: unknown collective");
  }

  // Inputs for a call: rank-dependent fills (allreduce's timed loops: zeros).
  void fill_inputs(Op op, size_t piece, size_t total, bool for_timing, CollectiveBuffers& b) {
    const size_t n = op == Op::kAllgather ? piece : total;
    if (op == Op::kAllreduce && for_timing) {
      std::fill_n(b.in.begin(), n, 0.0f);
      return;
    }
    for (size_t i = 0; i < n; ++i) b.in[i] = fill_value(rank_, i);
  }

  Mismatch check(Op op, size_t piece, size_t total, const CollectiveBuffers& b) const {
    // sum_by_residue[k]: the sum over ranks of fill_value(r, i) for i = k mod 64.
    float sum_by_residue[64];
    for (size_t k = 0; k < 64; ++k) {
      int s = 0;
      for (int r = 0; r < n_; ++r) s += static_cast<int>(fill_value(r, k));
      sum_by_residue[k] = static_cast<float>(s);
    }
    auto first_wrong = [](const float* got, size_t n, auto&& expected) {
      for (size_t i = 0; i < n; ++i)
        if (got[i] != expected(i)) return Mismatch{static_cast<int64_t>(i), got[i], expected(i)};
      return Mismatch{};
    };
    switch (op) {
      case Op::kAllreduce:
        return first_wrong(b.in.data(), total, [&](size_t i) { return sum_by_residue[i & 63]; });
      case Op::kAllgather:
        return first_wrong(b.out.data(), total, [&](size_t i) {
          return fill_value(static_cast<int>(i / piece), i % piece);
        });
      case Op::kReduceScatter: {
        const size_t offset = static_cast<size_t>(rank_) * piece;
        return first_wrong(b.out.data(), piece,
                           [&](size_t i) { return sum_by_residue[(offset + i) & 63]; });
      }
    }
    return Mismatch{};
  }

  Result<json> measure(Op op, bool mpi, size_t piece, size_t total, CollectiveBuffers& b) {
    const std::vector<size_t> counts(n_, piece);  // Comm's per-rank counts
    auto once = [&] { return call(op, mpi, piece, total, counts, b); };
    fill_inputs(op, piece, total, /*for_timing=*/true, b);
    // Untimed calls warm up and size the loop: one, and two more unless the
    // first alone fills a loop; a call's cost is the fastest of them (one may
    // have waited for a descheduled rank), the slowest rank's decides. Every
    // decision uses allreduced values, so all ranks make the same calls.
    double per_call = 0;
    for (int k = 0; k < 3; ++k) {
      Stopwatch sw;
      CRUCIBLE_RETURN_IF_ERROR(once());
      per_call = k == 0 ? sw.elapsed_s() : std::min(per_call, sw.elapsed_s());
      double slowest = per_call;
      CRUCIBLE_RETURN_IF_ERROR(comm_.allreduce(&slowest, 1, ReduceOp::kMax));
      if (k == 2 || (k == 0 && slowest >= mode_.loop_s)) {
        per_call = slowest;
        break;
      }
    }
    const int iters = static_cast<int>(std::clamp(mode_.loop_s / std::max(per_call, 1e-9), 1.0,
                                                  static_cast<double>(mode_.max_iters)));
    auto t = time_collective_calls(comm_, iters, once, /*warmup=*/0);
    if (!t) return t.status();

    // Validation: poisoned output, fresh inputs, one more call, every element.
    if (op != Op::kAllreduce)
      std::fill_n(b.out.begin(), op == Op::kAllgather ? total : piece, kPoison);
    fill_inputs(op, piece, total, /*for_timing=*/false, b);
    CRUCIBLE_RETURN_IF_ERROR(once());
    const std::string what = std::string(op_name(op)) + (mpi ? " mpi" : " comm");
    float* result = op == Op::kAllreduce ? b.in.data() : b.out.data();
    const size_t result_n = op == Op::kReduceScatter ? piece : total;
    if (opt_.tamper_for_testing) opt_.tamper_for_testing(what, result, result_n * sizeof(float));
    auto valid = agree_on_validity(
        comm_, check(op, piece, total, b),
        "[profile] interconnect " + what + " " + std::to_string(total * sizeof(float)) + " B");
    if (!valid) return valid.status();

    const double bytes = static_cast<double>(total * sizeof(float));
    const double algbw = bytes / t->seconds * 1e-9;
    return json{{"bytes", total * sizeof(float)},
                {"time_us", t->seconds * 1e6},
                {"iters", iters},
                {"algbw_gbs", algbw},
                {"busbw_gbs", algbw * detail::busbw_factor(op_name(op), n_)},
                {"faults_per_call", t->faults_per_call},
                {"valid", *valid}};
  }

  Comm& comm_;
  const Mode& mode_;
  const InterconnectOptions& opt_;
  const int n_, rank_;
};

}  // namespace

namespace detail {

std::vector<size_t> collective_sizes(size_t max_bytes, size_t factor) {
  std::vector<size_t> sizes;
  if (factor < 2) factor = 2;
  for (size_t s = 8; s <= max_bytes; s *= factor) {
    sizes.push_back(s);
    if (s > max_bytes / factor) break;  // s * factor would overflow or pass the cap
  }
  if (sizes.empty() || sizes.back() < max_bytes) sizes.push_back(max_bytes);
  return sizes;
}

double busbw_factor(const std::string& op, int ranks) {
  if (ranks < 1) return 0;
  if (op == "allreduce") return 2.0 * (ranks - 1) / ranks;
  if (op == "allgather" || op == "reduce_scatter") return static_cast<double>(ranks - 1) / ranks;
  return 0;
}

}  // namespace detail

Result<CallTiming> time_collective_calls(Comm& comm, int iters, const std::function<Status()>& call,
                                         int warmup) {
  if (iters < 1) return Status::invalid("[profile] time_collective_calls: iters must be >= 1");
  for (int i = 0; i < warmup; ++i) CRUCIBLE_RETURN_IF_ERROR(call());
  CallTiming best{INFINITY, 0};
  for (int loop = 0; loop < 3; ++loop) {
    CRUCIBLE_RETURN_IF_ERROR(comm.barrier());
    const long faults = minor_faults();
    Stopwatch sw;
    for (int i = 0; i < iters; ++i) CRUCIBLE_RETURN_IF_ERROR(call());
    double r[2] = {sw.elapsed_s() / iters, static_cast<double>(minor_faults() - faults) / iters};
    CRUCIBLE_RETURN_IF_ERROR(comm.allreduce(r, 2, ReduceOp::kMax));
    best.seconds = std::min(best.seconds, r[0]);
    best.faults_per_call = std::max(best.faults_per_call, r[1]);
  }
  return best;
}

Result<json> probe_interconnect(Comm& comm, const InterconnectOptions& options) {
  if (comm.size() < 2)
    return json{{"ranks", 1}, {"skipped", "one rank: run under crucible launch -n N -- probe"}};
  const Mode mode = mode_for(options);
  if (mode.max_bytes < 8)
    return Status::invalid("[profile] interconnect: max_bytes " + std::to_string(mode.max_bytes) +
                           " is below the smallest size measured (8 B)");
  auto hosts = comm::host_names(comm);
  if (!hosts) return hosts.status();
  json out = {{"ranks", comm.size()},
              {"hosts", *hosts},
              {"quick", options.quick},
              {"max_bytes", mode.max_bytes}};

  auto pingpong = interconnect::probe_pingpong(comm, mode, options);  // its buffers are freed here
  if (!pingpong) return pingpong.status();
  out["pingpong"] = *pingpong;

  // Zero-filled, hence pre-faulted. At least one float per rank: that is the
  // smallest allgather/reduce_scatter, whatever max_bytes says.
  CollectiveBuffers buf;
  const size_t floats = std::max<size_t>(mode.max_bytes / sizeof(float), comm.size());
  CRUCIBLE_RETURN_IF_ERROR(allocate(buf.in, floats, "collective input"));
  CRUCIBLE_RETURN_IF_ERROR(allocate(buf.out, floats, "collective output"));
  CollectiveProbe collectives(comm, mode, options);
  out["collectives"] = json::object();
  for (Op op : kOps) {
    auto r = collectives.run(op, buf);
    if (!r) return r.status();
    out["collectives"][op_name(op)] = *r;
  }

  // Overall validity: the first failure and how many there were.
  int failed = 0, total = 0;
  std::string first;
  auto tally = [&](const json& entry) {
    ++total;
    if (entry["valid"] == true) return;
    if (failed++ == 0) first = entry["valid"].get<std::string>();
  };
  for (const json& p : out["pingpong"]) tally(p);
  for (Op op : kOps)
    for (const char* impl : {"comm", "mpi"})
      for (const json& e : out["collectives"][op_name(op)][impl]) tally(e);
  out["valid"] = failed == 0 ? json(true)
                             : json(std::to_string(failed) + " of " + std::to_string(total) +
                                    " measurements failed validation; first: " + first);
  return out;
}

std::string interconnect_table(const json& ic) {
  std::string out;
  char line[512];
  if (ic.contains("skipped")) return "  " + ic["skipped"].get<std::string>() + "\n";
  const json& hosts = ic.value("hosts", json::array());
  std::set<std::string> distinct;
  for (const json& h : hosts) distinct.insert(h.get<std::string>());
  std::string host_list;
  for (const std::string& h : distinct) host_list += (host_list.empty() ? "" : ", ") + h;
  std::snprintf(line, sizeof line, "  %d ranks on %zu host%s (%s)\n", ic.value("ranks", 0),
                distinct.size(), distinct.size() == 1 ? "" : "s", host_list.c_str());
  out += line;

  const json& pp = ic.value("pingpong", json::array());
  if (pp.size() == 1) {
    const json& p = pp[0];
    std::snprintf(
        line, sizeof line, "  ping-pong %d-%d: latency %.2f us, bandwidth %.2f GB/s (%s message)\n",
        p["a"].get<int>(), p["b"].get<int>(), p["latency_us"].get<double>(),
        p["bandwidth_gbs"].get<double>(), format_bytes(p["message_bytes"].get<double>()).c_str());
    out += line;
  } else if (pp.size() > 1) {
    std::vector<double> lat, bw;
    const json* slowest = &pp[0];
    for (const json& p : pp) {
      lat.push_back(p["latency_us"].get<double>());
      bw.push_back(p["bandwidth_gbs"].get<double>());
      if (p["bandwidth_gbs"].get<double>() < (*slowest)["bandwidth_gbs"].get<double>())
        slowest = &p;
    }
    std::sort(lat.begin(), lat.end());
    std::sort(bw.begin(), bw.end());
    std::snprintf(line, sizeof line,
                  "  ping-pong, %zu pairs, min / median / max:\n"
                  "    latency %.2f / %.2f / %.2f us; bandwidth %.2f / %.2f / %.2f GB/s (%s "
                  "message); slowest pair %d-%d\n",
                  pp.size(), lat.front(), lat[lat.size() / 2], lat.back(), bw.front(),
                  bw[bw.size() / 2], bw.back(),
                  format_bytes(pp[0]["message_bytes"].get<double>()).c_str(),
                  (*slowest)["a"].get<int>(), (*slowest)["b"].get<int>());
    out += line;
  }

  const json& coll = ic.value("collectives", json::object());
  if (!coll.empty()) {
    std::snprintf(line, sizeof line, "  %-15s %8s %9s %9s %8s %10s %10s %9s\n", "collective",
                  "smallest", "Comm", "MPI", "largest", "Comm busbw", "MPI busbw", "Comm/MPI");
    out += line;
  }
  for (const char* op : {"allreduce", "allgather", "reduce_scatter"}) {
    if (!coll.contains(op)) continue;
    const json& c = coll[op]["comm"];
    const json& m = coll[op]["mpi"];
    if (c.empty() || m.empty()) continue;
    const double ratio = c.back()["busbw_gbs"].get<double>() / m.back()["busbw_gbs"].get<double>();
    std::snprintf(
        line, sizeof line, "  %-15s %8s %6.1f us %6.1f us %8s %5.2f GB/s %5.2f GB/s %8.2fx\n", op,
        format_bytes(c.front()["bytes"].get<double>()).c_str(), c.front()["time_us"].get<double>(),
        m.front()["time_us"].get<double>(), format_bytes(c.back()["bytes"].get<double>()).c_str(),
        c.back()["busbw_gbs"].get<double>(), m.back()["busbw_gbs"].get<double>(), ratio);
    out += line;
  }
  if (ic.contains("valid")) {
    if (ic["valid"] == true)
      out += "  valid: every payload and collective result checked\n";
    else
      out += "  VALIDATION FAILED: " + ic["valid"].get<std::string>() + "\n";
  }
  return out;
}

}  // namespace crucible::profile
