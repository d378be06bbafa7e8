// Tests of the interconnect probe and the plain-MPI peer, run by every rank of
// crucible_mpi_tests (2 and 4 ranks). Probes use small max_bytes to stay fast;
// timings are only checked to be positive and finite.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm.h"
#include "comm/mpi_peer.h"
#include "profile/probe_interconnect.h"

namespace crucible::profile {
namespace {

using nlohmann::json;

comm::Comm& comm() { return **comm::world(); }
int rank() { return comm().rank(); }
int size() { return comm().size(); }

constexpr size_t kQuickMax = 96 << 10;
constexpr const char* kOps[] = {"allreduce", "allgather", "reduce_scatter"};

json probe_or_fail(const InterconnectOptions& o) {
  auto r = probe_interconnect(comm(), o);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r ? *r : json::object();
}

// One quick probe at 96 KiB (not a size of the x8 ladder), shared by the schema tests (every rank
// runs the tests in the same order, so every rank gets here in the same test).
const json& quick_probe() {
  static const json j = probe_or_fail({true, kQuickMax});
  return j;
}

bool positive_finite(const json& v) {
  return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0;
}

// Every rank must hold the same document.
void expect_same_on_every_rank(const json& j) {
  const std::string s = j.dump();
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  std::vector<uint64_t> all(size());
  ASSERT_TRUE(comm().allgather_bytes(&h, sizeof h, all.data()).is_ok());
  for (int r = 0; r < size(); ++r) EXPECT_EQ(all[r], h) << "rank " << r << " differs";
}

TEST(ProbeInterconnect, SchemaHostsAndEveryPairExactlyOnce) {
  const json& j = quick_probe();
  EXPECT_EQ(j["ranks"], size());
  EXPECT_EQ(j["quick"], true);
  EXPECT_EQ(j["max_bytes"], kQuickMax);
  EXPECT_EQ(j["valid"], true) << j["valid"];
  ASSERT_TRUE(j["hosts"].is_array());
  ASSERT_EQ(j["hosts"].size(), static_cast<size_t>(size()));
  for (const json& h : j["hosts"]) EXPECT_FALSE(h.get<std::string>().empty());

  ASSERT_TRUE(j["pingpong"].is_array());
  EXPECT_EQ(j["pingpong"].size(), static_cast<size_t>(size() * (size() - 1) / 2));
  std::set<std::pair<int, int>> seen;
  for (const json& p : j["pingpong"]) {
    const int a = p["a"], b = p["b"];
    EXPECT_LT(a, b);
    EXPECT_GE(a, 0);
    EXPECT_LT(b, size());
    EXPECT_TRUE(seen.insert({a, b}).second) << "pair " << a << "-" << b << " twice";
    EXPECT_TRUE(positive_finite(p["latency_us"])) << p;
    EXPECT_TRUE(positive_finite(p["bandwidth_gbs"])) << p;
    EXPECT_EQ(p["message_bytes"], kQuickMax);
    EXPECT_EQ(p["valid"], true) << p;
  }
  for (int a = 0; a < size(); ++a)
    for (int b = a + 1; b < size(); ++b) EXPECT_TRUE(seen.count({a, b})) << a << "-" << b;
  expect_same_on_every_rank(j);
}

TEST(ProbeInterconnect, CollectiveSizesAscendingCappedAndBusbwFactors) {
  const json& j = quick_probe();
  const size_t max_bytes = kQuickMax;
  for (const char* op : kOps) {
    SCOPED_TRACE(op);
    const json& c = j["collectives"][op];
    const double factor =
        std::string(op) == "allreduce" ? 2.0 * (size() - 1) / size() : double(size() - 1) / size();
    EXPECT_DOUBLE_EQ(c["busbw_factor"].get<double>(), factor);
    for (const char* impl : {"comm", "mpi"}) {
      SCOPED_TRACE(impl);
      const json& entries = c[impl];
      ASSERT_GE(entries.size(), 5u);
      size_t prev = 0;
      for (const json& e : entries) {
        const size_t bytes = e["bytes"];
        EXPECT_GT(bytes, prev) << "sizes must ascend strictly";
        EXPECT_LE(bytes, max_bytes);
        if (std::string(op) != "allreduce") {
          EXPECT_EQ(bytes % (4 * size()), 0u);
        }
        prev = bytes;
        ASSERT_TRUE(positive_finite(e["time_us"])) << e;
        EXPECT_GE(e["iters"].get<int>(), 1);
        EXPECT_GE(e["faults_per_call"].get<double>(), 0.0);
        const double algbw = e["algbw_gbs"];
        EXPECT_NEAR(algbw, bytes / e["time_us"].get<double>() * 1e-3, 1e-9 * algbw);
        EXPECT_NEAR(e["busbw_gbs"].get<double>(), algbw * factor, 1e-9 * algbw);
        EXPECT_EQ(e["valid"], true) << e;
      }
      EXPECT_EQ(entries.back()["bytes"], max_bytes) << "the cap itself is measured";
      // Comm and MPI are measured at the same sizes.
      ASSERT_EQ(entries.size(), c["comm"].size());
      for (size_t i = 0; i < entries.size(); ++i)
        EXPECT_EQ(entries[i]["bytes"], c["comm"][i]["bytes"]);
    }
  }
  // Quick mode: x8 from 8 B (allreduce measures the nominal sizes exactly).
  std::vector<size_t> got;
  for (const json& e : j["collectives"]["allreduce"]["comm"]) got.push_back(e["bytes"]);
  EXPECT_EQ(got, (std::vector<size_t>{8, 64, 512, 4096, 32768, kQuickMax}));
}

TEST(ProbeInterconnect, FullModeGrowsByFourUpToTheCap) {
  json j = probe_or_fail({false, 2048});
  std::vector<size_t> got;
  for (const json& e : j["collectives"]["allreduce"]["mpi"]) got.push_back(e["bytes"]);
  EXPECT_EQ(got, (std::vector<size_t>{8, 32, 128, 512, 2048}));
  EXPECT_EQ(j["pingpong"][0]["message_bytes"], 2048);
  EXPECT_EQ(j["valid"], true) << j["valid"];
  expect_same_on_every_rank(j);
}

TEST(ProbeInterconnect, ValidationCatchesAWrongCollectiveResult) {
  const int culprit = size() - 1;
  InterconnectOptions o{true, 4096};
  o.tamper_for_testing = [&](const std::string& what, void* data, size_t bytes) {
    if (what != "allgather mpi" || rank() != culprit) return;
    float* f = static_cast<float*>(data);
    f[bytes / sizeof(float) - 1] += 1.0f;  // the last rank's block, last element
  };
  json j = probe_or_fail(o);
  size_t bad = 0;
  for (const char* op : kOps)
    for (const char* impl : {"comm", "mpi"})
      for (const json& e : j["collectives"][op][impl]) {
        if (std::string(op) == "allgather" && std::string(impl) == "mpi") {
          ASSERT_TRUE(e["valid"].is_string()) << e;
          const std::string msg = e["valid"];
          EXPECT_NE(msg.find("allgather mpi"), std::string::npos) << msg;
          EXPECT_NE(msg.find("rank " + std::to_string(culprit)), std::string::npos) << msg;
          ++bad;
        } else {
          EXPECT_EQ(e["valid"], true) << op << " " << impl << ": " << e;
        }
      }
  ASSERT_TRUE(j["valid"].is_string());
  EXPECT_EQ(j["valid"].get<std::string>().rfind(std::to_string(bad) + " of ", 0), 0u) << j["valid"];
  EXPECT_NE(interconnect_table(j).find("VALIDATION FAILED"), std::string::npos);
  expect_same_on_every_rank(j);
}

TEST(ProbeInterconnect, ValidationCatchesAWrongReduceScatterPieceOnRankZero) {
  InterconnectOptions o{true, 4096};
  o.tamper_for_testing = [&](const std::string& what, void* data, size_t) {
    if (what == "reduce_scatter comm" && rank() == 0) static_cast<float*>(data)[0] = 1e6f;
  };
  json j = probe_or_fail(o);
  for (const json& e : j["collectives"]["reduce_scatter"]["comm"]) {
    ASSERT_TRUE(e["valid"].is_string()) << e;
    EXPECT_NE(e["valid"].get<std::string>().find("rank 0: element 0 = 1e+06"), std::string::npos)
        << e["valid"];
  }
  for (const json& e : j["collectives"]["reduce_scatter"]["mpi"]) EXPECT_EQ(e["valid"], true);
}

TEST(ProbeInterconnect, ValidationCatchesAWrongPingPongPayload) {
  InterconnectOptions o{true, 4096};
  o.tamper_for_testing = [&](const std::string& what, void* data, size_t bytes) {
    if (what != "pingpong 0-1" || rank() != 1) return;
    ASSERT_EQ(bytes, 4096u);
    static_cast<unsigned char*>(data)[5] ^= 0x10;
  };
  json j = probe_or_fail(o);
  for (const json& p : j["pingpong"]) {
    if (p["a"] == 0 && p["b"] == 1) {
      ASSERT_TRUE(p["valid"].is_string()) << p;
      const std::string msg = p["valid"];
      // Rank 1 saw the flipped byte and echoed it, so rank 0 saw it too.
      EXPECT_NE(msg.find("rank 1: byte 5 of the 4096-byte"), std::string::npos) << msg;
      EXPECT_NE(msg.find("rank 0: byte 5"), std::string::npos) << msg;
    } else {
      EXPECT_EQ(p["valid"], true) << p;
    }
  }
  EXPECT_TRUE(j["valid"].is_string());
}

TEST(ProbeInterconnect, TinyCapStillGivesEveryRankOneFloat) {
  json j = probe_or_fail({true, 8});
  ASSERT_EQ(j["collectives"]["allreduce"]["comm"].size(), 1u);
  EXPECT_EQ(j["collectives"]["allreduce"]["comm"][0]["bytes"], 8);
  for (const char* op : {"allgather", "reduce_scatter"}) {
    ASSERT_EQ(j["collectives"][op]["mpi"].size(), 1u) << op;
    EXPECT_EQ(j["collectives"][op]["mpi"][0]["bytes"], 4 * size()) << op;
  }
  EXPECT_EQ(j["pingpong"][0]["message_bytes"], 8);
  EXPECT_EQ(j["valid"], true) << j["valid"];
}

TEST(ProbeInterconnect, OptionsAndSingleRank) {
  auto bad = probe_interconnect(comm(), {true, 4});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("[profile] interconnect"), std::string::npos);

  auto single = comm::make_single_comm();
  auto one = probe_interconnect(*single, {});
  ASSERT_TRUE(one.is_ok());
  EXPECT_EQ((*one)["ranks"], 1);
  EXPECT_EQ((*one)["skipped"], "one rank: run under crucible launch -n N -- probe");
  EXPECT_FALSE(one->contains("pingpong"));
  EXPECT_NE(interconnect_table(*one).find("one rank"), std::string::npos);
}

TEST(ProbeInterconnect, TableNamesEveryCollective) {
  const std::string t = interconnect_table(quick_probe());
  for (const char* s : {"ping-pong", "allreduce", "allgather", "reduce_scatter", "GB/s", "valid"})
    EXPECT_NE(t.find(s), std::string::npos) << s << " missing from\n" << t;
  EXPECT_EQ(t.find("FAILED"), std::string::npos) << t;
  EXPECT_NE(t.find(std::to_string(size()) + " ranks"), std::string::npos) << t;
}

TEST(ProbeInterconnect, SizesAndFactorsPureLogic) {
  using detail::collective_sizes;
  EXPECT_EQ(collective_sizes(8, 4), (std::vector<size_t>{8}));
  EXPECT_EQ(collective_sizes(10, 4), (std::vector<size_t>{8, 10}));
  EXPECT_EQ(collective_sizes(512, 8), (std::vector<size_t>{8, 64, 512}));
  const std::vector<size_t> full = collective_sizes(size_t{256} << 20, 4);
  ASSERT_EQ(full.size(), 14u);
  EXPECT_EQ(full[12], size_t{128} << 20);
  EXPECT_EQ(full[13], size_t{256} << 20);
  const std::vector<size_t> huge = collective_sizes(SIZE_MAX, 8);  // no overflow
  for (size_t i = 1; i < huge.size(); ++i) EXPECT_GT(huge[i], huge[i - 1]);
  EXPECT_EQ(huge.back(), SIZE_MAX);
  EXPECT_DOUBLE_EQ(detail::busbw_factor("allreduce", 4), 1.5);
  EXPECT_DOUBLE_EQ(detail::busbw_factor("allgather", 4), 0.75);
  EXPECT_DOUBLE_EQ(detail::busbw_factor("reduce_scatter", 2), 0.5);
  EXPECT_DOUBLE_EQ(detail::busbw_factor("allreduce", 1), 0.0);
  EXPECT_DOUBLE_EQ(detail::busbw_factor("broadcast", 4), 0.0);
}

TEST(ProbeInterconnect, TimeCollectiveCallsCountsCallsAndPropagatesErrors) {
  int calls = 0;
  auto t = time_collective_calls(comm(), 5, [&] {
    ++calls;
    return comm().barrier();
  });
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(calls, 2 + 3 * 5);
  EXPECT_TRUE(std::isfinite(t->seconds) && t->seconds > 0);
  EXPECT_FALSE(time_collective_calls(comm(), 0, [] { return Status::ok(); }).is_ok());
  auto err = time_collective_calls(comm(), 2, [] { return Status::corrupt("[test] boom"); });
  ASSERT_FALSE(err.is_ok());
  EXPECT_EQ(err.status().message(), "[test] boom");
}

// ---- the plain-MPI peer ----

TEST(MpiPeer, CollectivesGiveMpisResults) {
  const int n = size(), r = rank();
  const size_t count = 1001;
  std::vector<float> x(count);
  for (size_t i = 0; i < count; ++i) x[i] = float(r + 1) * float(i % 10);
  ASSERT_TRUE(comm::mpi_peer_allreduce_sum(x.data(), count).is_ok());
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(x[i], float(n * (n + 1) / 2) * float(i % 10)) << i;

  std::vector<float> piece(count, float(r)), all(count * n, -1.0f);
  ASSERT_TRUE(comm::mpi_peer_allgather(piece.data(), count, all.data()).is_ok());
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], float(i / count)) << i;

  std::vector<float> full(count * n), mine(count, -1.0f);
  for (size_t i = 0; i < full.size(); ++i) full[i] = float(i) + float(r);
  ASSERT_TRUE(comm::mpi_peer_reduce_scatter(full.data(), mine.data(), count).is_ok());
  for (size_t i = 0; i < count; ++i)
    ASSERT_EQ(mine[i], float(n) * float(r * count + i) + float(n * (n - 1) / 2)) << i;
}

TEST(MpiPeer, ArgumentErrorsDoNotCallMpi) {
  auto null = comm::mpi_peer_allreduce_sum(nullptr, 3);
  EXPECT_EQ(null.code(), Code::kInvalidArgument);
  EXPECT_NE(null.message().find("[dist] mpi_peer allreduce"), std::string::npos);
  float f = 0;
  auto big = comm::mpi_peer_allgather(&f, size_t{INT_MAX} + 1, &f);
  EXPECT_EQ(big.code(), Code::kInvalidArgument);
  EXPECT_NE(big.message().find("int count"), std::string::npos) << big.message();
  // Zero elements is a valid (empty) collective.
  EXPECT_TRUE(comm::mpi_peer_reduce_scatter(&f, &f + 1, 0).is_ok());
}

}  // namespace
}  // namespace crucible::profile
