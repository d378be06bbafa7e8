// The interconnect probe's ping-pong (profile/probe_interconnect.h,
// "pingpong"): every pair of ranks in turn, 8-byte round trips for latency,
// the large message there and back for bandwidth, each message stamped and
// the last one checked in full on both sides.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>

#include "comm/mpi_peer.h"
#include "core/clock.h"
#include "profile/probe_interconnect_parts.h"

namespace crucible::profile::interconnect {
namespace {

using comm::Comm;
using comm::ReduceOp;
using nlohmann::json;

constexpr int kTagLatency = 7101;
constexpr int kTagBandwidth = 7102;

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

}  // namespace

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

}  // namespace crucible::profile::interconnect
