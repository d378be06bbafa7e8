// The interconnect probe: ping-pong per pair, collectives through Comm and
// plain MPI, each validated (see probe_interconnect.h for the schema).
#include "profile/probe_interconnect.h"

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

constexpr size_t kMiB = size_t{1} << 20;
constexpr int kTagLatency = 7101;
constexpr int kTagBandwidth = 7102;
constexpr float kPoison = -1.0f;  // never a fill value (those are 0..63)

// What quick and full mode spend.
struct Mode {
  size_t max_bytes;
  size_t size_factor;
  double loop_s;        // target length of one timed loop of a collective
  int max_iters;        // calls per loop at most (small sizes)
  int latency_trips;    // timed 8-byte round trips per pair
  int bandwidth_trips;  // timed large round trips per pair
};

Mode mode_for(const InterconnectOptions& o) {
  Mode m = o.quick ? Mode{16 * kMiB, 8, 0.01, 50, 200, 3} : Mode{256 * kMiB, 4, 0.05, 200, 1000, 5};
  if (o.max_bytes != 0) m.max_bytes = o.max_bytes;
  return m;
}

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

// v := n zeros (touching every page). An allocation failure is an error, not
// an exception crossing the module boundary.
template <typename T>
Status allocate(std::vector<T>& v, size_t n, const char* what) {
  try {
    v.assign(n, T{});
  } catch (const std::bad_alloc&) {
    return Status::invalid("[profile] interconnect: cannot allocate the " + std::string(what) +
                           " buffer (" + std::to_string(n * sizeof(T)) +
                           " bytes); lower max_bytes");
  }
  return Status::ok();
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

// ---- ping-pong ----

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The stamp of round trip k between a and b, and word w of the pair's payload.
uint64_t stamp(int a, int b, uint64_t k) {
  return splitmix64((uint64_t(a) << 44) ^ (uint64_t(b) << 24) ^ k ^ 0x5157ull);
}
uint64_t pattern(int a, int b, size_t w) { return splitmix64(stamp(a, b, ~uint64_t{0}) ^ w); }

// What one side of a pair saw: 0 fine, 1 a timed message with the wrong stamp,
// 2 + b: byte b of the validation message wrong. A double, for allreduce(max).
constexpr double kBadStamp = 1;
double first_wrong_byte(const uint64_t* got, size_t words, int a, int b) {
  for (size_t w = 0; w < words; ++w) {
    const uint64_t x = got[w] ^ pattern(a, b, w);
    if (x != 0) return 2.0 + static_cast<double>(w * 8 + __builtin_ctzll(x) / 8);
  }
  return 0;
}

struct PairSlots {  // per pair, in the array every rank allreduces (max)
  static constexpr int kCount = 4;
  enum { kLatencyUs, kBandwidthGbs, kBadA, kBadB };
};

class PingPong {
 public:
  PingPong(Comm& comm, const Mode& mode, const InterconnectOptions& opt)
      : comm_(comm),
        mode_(mode),
        opt_(opt),
        words_(std::max<size_t>(1, std::min(mode.max_bytes, 64 * kMiB) / 8)) {}

  Status allocate_buffers() {  // zero-filled: pre-faulted
    CRUCIBLE_RETURN_IF_ERROR(allocate(send_, words_, "ping-pong send"));
    return allocate(recv_, words_, "ping-pong receive");
  }

  size_t message_bytes() const { return words_ * 8; }

  // This rank's part of pair (a, b): fills slots[0..kCount) where it measured
  // or checked something (the other slots stay 0).
  Status run(int a, int b, double* slots) {
    const int me = comm_.rank();
    if (me != a && me != b) return Status::ok();
    const int peer = me == a ? b : a;
    double& bad = slots[me == a ? PairSlots::kBadA : PairSlots::kBadB];

    // Latency: 8-byte round trips, each timed; the median is the figure.
    const int warm = 20, trips = mode_.latency_trips;
    std::vector<double> half_us;
    half_us.reserve(trips);
    for (int k = 0; k < warm + trips; ++k) {
      const uint64_t want = stamp(a, b, k);
      uint64_t msg = want;
      if (me == a) {
        Stopwatch sw;
        CRUCIBLE_RETURN_IF_ERROR(comm_.send(&msg, 8, peer, kTagLatency));
        CRUCIBLE_RETURN_IF_ERROR(comm_.recv(&msg, 8, peer, kTagLatency));
        const double t = sw.elapsed_s();
        if (k >= warm) half_us.push_back(t * 0.5e6);
      } else {
        CRUCIBLE_RETURN_IF_ERROR(comm_.recv(&msg, 8, peer, kTagLatency));
        CRUCIBLE_RETURN_IF_ERROR(comm_.send(&msg, 8, peer, kTagLatency));  // checked below
      }
      if (msg != want && bad == 0) bad = kBadStamp;
    }
    if (me == a) {
      std::nth_element(half_us.begin(), half_us.begin() + trips / 2, half_us.end());
      slots[PairSlots::kLatencyUs] = half_us[trips / 2];
    }

    // Bandwidth: the large message there and back; the first and last words
    // carry the round trip's stamp, checked on both sides.
    const size_t W = words_, bytes = W * 8;
    if (me == a)
      for (size_t w = 0; w < W; ++w) send_[w] = pattern(a, b, w);
    double best = INFINITY;
    for (int k = 0; k < 1 + mode_.bandwidth_trips; ++k) {  // the first trip warms up
      const uint64_t want = stamp(a, b, 1000000 + k);
      if (me == a) {
        send_[0] = send_[W - 1] = want;
        Stopwatch sw;
        CRUCIBLE_RETURN_IF_ERROR(comm_.send(send_.data(), bytes, peer, kTagBandwidth));
        CRUCIBLE_RETURN_IF_ERROR(comm_.recv(recv_.data(), bytes, peer, kTagBandwidth));
        if (k > 0) best = std::min(best, sw.elapsed_s());
      } else {
        CRUCIBLE_RETURN_IF_ERROR(comm_.recv(recv_.data(), bytes, peer, kTagBandwidth));
        CRUCIBLE_RETURN_IF_ERROR(comm_.send(recv_.data(), bytes, peer, kTagBandwidth));
      }
      if ((recv_[0] != want || recv_[W - 1] != want) && bad == 0) bad = kBadStamp;
    }
    if (me == a) slots[PairSlots::kBandwidthGbs] = bytes / (best / 2) * 1e-9;

    // Validation: the plain pattern once more into a poisoned buffer, checked
    // in full by b on arrival and by a on return.
    const std::string what = "pingpong " + std::to_string(a) + "-" + std::to_string(b);
    std::fill(recv_.begin(), recv_.end(), 0xa5a5a5a5a5a5a5a5ull);
    if (me == a) {
      send_[0] = pattern(a, b, 0);
      send_[W - 1] = pattern(a, b, W - 1);
      CRUCIBLE_RETURN_IF_ERROR(comm_.send(send_.data(), bytes, peer, kTagBandwidth));
      CRUCIBLE_RETURN_IF_ERROR(comm_.recv(recv_.data(), bytes, peer, kTagBandwidth));
      if (opt_.tamper_for_testing) opt_.tamper_for_testing(what, recv_.data(), bytes);
      if (bad == 0) bad = first_wrong_byte(recv_.data(), W, a, b);
    } else {
      CRUCIBLE_RETURN_IF_ERROR(comm_.recv(recv_.data(), bytes, peer, kTagBandwidth));
      if (opt_.tamper_for_testing) opt_.tamper_for_testing(what, recv_.data(), bytes);
      if (bad == 0) bad = first_wrong_byte(recv_.data(), W, a, b);
      CRUCIBLE_RETURN_IF_ERROR(comm_.send(recv_.data(), bytes, peer, kTagBandwidth));
    }
    return Status::ok();
  }

 private:
  Comm& comm_;
  const Mode& mode_;
  const InterconnectOptions& opt_;
  size_t words_;
  std::vector<uint64_t> send_, recv_;
};

std::string describe_bad(int rank, double code, size_t bytes) {
  if (code == 0) return "";
  std::string s = "rank " + std::to_string(rank) + ": ";
  if (code == kBadStamp) return s + "a timed message arrived with the wrong stamp";
  char b[96];
  std::snprintf(b, sizeof b, "byte %.0f of the %zu-byte validation message was wrong", code - 2,
                bytes);
  return s + b;
}

Result<json> probe_pingpong(Comm& comm, const Mode& mode, const InterconnectOptions& opt) {
  const int n = comm.size();
  std::vector<std::pair<int, int>> pairs;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) pairs.emplace_back(a, b);
  std::vector<double> slots(pairs.size() * PairSlots::kCount, 0.0);
  PingPong pp(comm, mode, opt);
  CRUCIBLE_RETURN_IF_ERROR(pp.allocate_buffers());
  for (size_t p = 0; p < pairs.size(); ++p) {
    CRUCIBLE_RETURN_IF_ERROR(
        pp.run(pairs[p].first, pairs[p].second, &slots[p * PairSlots::kCount]));
    // One pair at a time; the others sleep (with more ranks than cores, ranks
    // spinning in MPI's barrier would take the cores the measured pair runs on).
    CRUCIBLE_RETURN_IF_ERROR(comm::quiet_barrier(comm));
  }
  CRUCIBLE_RETURN_IF_ERROR(comm.allreduce(slots.data(), slots.size(), ReduceOp::kMax));
  json out = json::array();
  for (size_t p = 0; p < pairs.size(); ++p) {
    const double* s = &slots[p * PairSlots::kCount];
    const auto [a, b] = pairs[p];
    json valid = true;
    if (s[PairSlots::kBadA] != 0 || s[PairSlots::kBadB] != 0) {
      std::string msg =
          "[profile] interconnect pingpong " + std::to_string(a) + "-" + std::to_string(b) + ": ";
      std::string da = describe_bad(a, s[PairSlots::kBadA], pp.message_bytes());
      std::string db = describe_bad(b, s[PairSlots::kBadB], pp.message_bytes());
      msg += da + (!da.empty() && !db.empty() ? "; " : "") + db;
      valid = msg;
    }
    out.push_back({{"a", a},
                   {"b", b},
                   {"latency_us", s[PairSlots::kLatencyUs]},
                   {"message_bytes", pp.message_bytes()},
                   {"bandwidth_gbs", s[PairSlots::kBandwidthGbs]},
                   {"valid", valid}});
  }
  return out;
}

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

  auto pingpong = probe_pingpong(comm, mode, options);  // its buffers are freed here
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
