#include "profile/probe_memory.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace crucible::profile {
namespace {

// Runs `iterations` STREAM rounds the way the probe does, element by element.
struct Arrays {
  std::vector<double> a, b, c;
  Arrays(size_t n, int iterations, double s) : a(n, 1.0), b(n, 2.0), c(n, 0.0) {
    for (int k = 0; k < iterations; ++k) {
      for (size_t j = 0; j < n; ++j) c[j] = a[j];
      for (size_t j = 0; j < n; ++j) b[j] = s * c[j];
      for (size_t j = 0; j < n; ++j) c[j] = a[j] + b[j];
      for (size_t j = 0; j < n; ++j) a[j] = b[j] + s * c[j];
    }
  }
};

TEST(ProbeMemory, CheckAcceptsCorrectArrays) {
  for (int iterations : {0, 1, 4, 10}) {
    Arrays x(1000, iterations, 3.0);
    Status st = check_stream_arrays(x.a.data(), x.b.data(), x.c.data(), 1000, iterations, 3.0);
    EXPECT_TRUE(st.is_ok()) << "iterations " << iterations << ": " << st.message();
  }
}

TEST(ProbeMemory, CheckRejectsWrongIterationCount) {
  Arrays x(64, 4, 3.0);
  EXPECT_FALSE(check_stream_arrays(x.a.data(), x.b.data(), x.c.data(), 64, 5, 3.0).is_ok());
  EXPECT_FALSE(check_stream_arrays(x.a.data(), x.b.data(), x.c.data(), 64, 4, 2.0).is_ok());
}

TEST(ProbeMemory, CheckNamesTheOneCorruptedElementInEachArray) {
  const size_t n = 4096;
  const char* names[3] = {"a", "b", "c"};
  for (int which = 0; which < 3; ++which) {
    Arrays x(n, 10, 3.0);
    std::vector<double>* arrays[3] = {&x.a, &x.b, &x.c};
    // One element off by a relative 1e-12: 10x the tolerance, far below what an
    // array-wide average (n = 4096) would notice.
    (*arrays[which])[1234] *= 1.0 + 1e-12;
    Status st = check_stream_arrays(x.a.data(), x.b.data(), x.c.data(), n, 10, 3.0);
    ASSERT_FALSE(st.is_ok()) << "corruption in " << names[which] << " not caught";
    EXPECT_EQ(st.code(), Code::kCorrupt);
    EXPECT_NE(st.message().find(std::string(names[which]) + "[1234]"), std::string::npos)
        << st.message();
    EXPECT_NE(st.message().find("relative error"), std::string::npos) << st.message();
    EXPECT_EQ(st.message().rfind("[probe] memory", 0), 0u) << st.message();
  }
}

TEST(ProbeMemory, CheckRejectsNanAndLastElement) {
  const size_t n = 100;
  Arrays x(n, 3, 3.0);
  x.c[n - 1] = std::numeric_limits<double>::quiet_NaN();
  Status st = check_stream_arrays(x.a.data(), x.b.data(), x.c.data(), n, 3, 3.0);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("c[99]"), std::string::npos) << st.message();
}

TEST(ProbeMemory, LastLevelCacheIsPlausible) {
  size_t llc = last_level_cache_bytes();
  // Unknown (0) is allowed on odd platforms; otherwise between 256 KiB and 4 GiB.
  if (llc != 0) {
    EXPECT_GE(llc, size_t(256) << 10);
    EXPECT_LE(llc, size_t(4) << 30);
  }
}

void expect_run(const nlohmann::json& r) {
  ASSERT_TRUE(r.is_object());
  EXPECT_GE(r.value("threads", 0), 1);
  EXPECT_TRUE(r.value("valid", false)) << r.dump();
  EXPECT_FALSE(r.contains("error"));
  for (const char* k : {"copy", "scale", "add", "triad"}) {
    ASSERT_TRUE(r.contains(k)) << k;
    double best = r[k].value("best_gbs", -1.0), avg = r[k].value("avg_gbs", -1.0);
    EXPECT_TRUE(std::isfinite(best) && best > 0) << k << " best " << best;
    EXPECT_TRUE(std::isfinite(avg) && avg > 0) << k << " avg " << avg;
    EXPECT_GE(best, avg * (1 - 1e-9)) << k;  // best round is at least the mean
  }
}

TEST(ProbeMemory, TinyArraysGiveValidPositiveBandwidth) {
  MemoryOptions o;
  o.quick = true;
  o.array_bytes = 256 << 10;  // 256 KiB per array: milliseconds
  o.repeats = 3;
  nlohmann::json m = probe_memory(o);
  EXPECT_EQ(m.value("array_bytes", size_t(0)), size_t(256) << 10);
  EXPECT_EQ(m.value("repeats", 0), 3);
  EXPECT_TRUE(m.contains("llc_bytes"));
  EXPECT_TRUE(m.value("valid", false)) << m.dump();
  expect_run(m["threads_1"]);
  expect_run(m["threads_all"]);
  EXPECT_EQ(m["threads_1"].value("threads", 0), 1);
  EXPECT_TRUE(m.contains("huge_pages"));

  std::string table = memory_table(m);
  EXPECT_NE(table.find("triad"), std::string::npos) << table;
  EXPECT_NE(table.find("1 thread"), std::string::npos) << table;
  EXPECT_EQ(table.find("INVALID"), std::string::npos) << table;
}

TEST(ProbeMemory, OddSizesAndRepeatClampStillValidate) {
  MemoryOptions o;
  o.array_bytes = 8 * 1001 + 5;  // not a multiple of 8, odd element count
  o.repeats = 1;                 // clamped to 2: STREAM's average skips round 1
  nlohmann::json m = probe_memory(o);
  EXPECT_EQ(m.value("array_bytes", size_t(0)), size_t(8 * 1001));
  EXPECT_EQ(m.value("repeats", 0), 2);
  EXPECT_TRUE(m.value("valid", false)) << m.dump();
}

TEST(ProbeMemory, TableReportsInvalidResults) {
  nlohmann::json m = {{"array_bytes", 1 << 20},
                      {"llc_bytes", 1 << 20},
                      {"valid", false},
                      {"error", "[probe] memory: STREAM check failed: b[7]"}};
  std::string table = memory_table(m);
  EXPECT_NE(table.find("INVALID"), std::string::npos) << table;
  EXPECT_NE(table.find("b[7]"), std::string::npos) << table;
}

}  // namespace
}  // namespace crucible::profile
