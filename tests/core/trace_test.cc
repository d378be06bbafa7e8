#include "core/trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <thread>

#include "core/kernel_stats.h"

namespace crucible::trace {
namespace {

// The tracer is process-wide: each test starts and ends inactive and empty.
class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_active(false);
    clear();
  }
  void TearDown() override {
    set_active(false);
    clear();
  }
};

const Event* find(const std::vector<Event>& ev, const std::string& name) {
  for (const auto& e : ev) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

TEST_F(TraceTest, InactiveRecordsNothing) {
  {
    Scope s("step", "phase");
    counter("mem", 1.0);
    record_complete("gemm", "kernel", now_ns(), now_ns() + 10);
    ScopedKernelTimer k(KernelClass::gemm);
  }
  EXPECT_TRUE(take_events().empty());
}

TEST_F(TraceTest, ScopeStartedInactiveStaysSilentEvenIfActivatedInside) {
  {
    Scope s("outer", "phase");
    set_active(true);
  }
  EXPECT_TRUE(take_events().empty());
}

TEST_F(TraceTest, NestedScopesNestAndCarryCategories) {
  set_active(true);
  {
    Scope outer("forward", "phase");
    { Scope inner("attention", "kernel"); }
    counter("mem_in_use", 42.0);
  }
  auto ev = take_events();
  ASSERT_EQ(ev.size(), 3u);
  const Event* outer = find(ev, "forward");
  const Event* inner = find(ev, "attention");
  const Event* c = find(ev, "mem_in_use");
  ASSERT_TRUE(outer && inner && c);
  EXPECT_EQ(outer->ph, 'X');
  EXPECT_STREQ(outer->cat, "phase");
  EXPECT_STREQ(inner->cat, "kernel");
  EXPECT_GE(inner->ts_ns, outer->ts_ns);
  EXPECT_LE(inner->ts_ns + inner->dur_ns, outer->ts_ns + outer->dur_ns);
  EXPECT_EQ(c->ph, 'C');
  EXPECT_EQ(c->value, 42.0);
  EXPECT_EQ(outer->tid, inner->tid);
  // Taken events are gone.
  EXPECT_TRUE(take_events().empty());
}

TEST_F(TraceTest, KernelTimerBecomesKernelEventNamedByClass) {
  set_active(true);
  { ScopedKernelTimer k(KernelClass::layernorm, 10.0); }
  auto ev = take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_STREQ(ev[0].name, "layernorm");
  EXPECT_STREQ(ev[0].cat, "kernel");
  EXPECT_GE(ev[0].dur_ns, 0);
}

TEST_F(TraceTest, ThreadsGetDistinctTidsAndNames) {
  set_active(true);
  { Scope s("main work", "phase"); }
  std::thread t([] {
    set_thread_name("ckpt writer");
    Scope s("save", "ckpt");
  });
  t.join();
  auto ev = take_events();  // the writer thread has exited: its events survive
  const Event* m = find(ev, "main work");
  const Event* w = find(ev, "save");
  ASSERT_TRUE(m && w);
  EXPECT_NE(m->tid, w->tid);
  std::map<int, std::string> names;
  for (auto& [tid, name] : thread_names()) names[tid] = name;
  EXPECT_EQ(names[w->tid], "ckpt writer");
  EXPECT_EQ(names[m->tid], "main");
}

TEST_F(TraceTest, OriginShiftsTimestamps) {
  set_active(true);
  const int64_t old_origin = origin_ns();
  const int64_t t = now_ns();
  set_origin_ns(t);
  record_complete("a", "phase", t + 5000, t + 7000);
  set_origin_ns(old_origin);
  auto ev = take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].ts_ns, 5000);
  EXPECT_EQ(ev[0].dur_ns, 2000);
}

// take_events() while another thread records: every event lands in exactly
// one take, none lost or duplicated.
TEST_F(TraceTest, TakeWhileAnotherThreadRecordsLosesNothing) {
  set_active(true);
  constexpr int kEvents = 20000;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < kEvents; ++i) counter("n", double(i));
    done = true;
  });
  std::vector<double> seen;
  auto collect = [&] {
    for (const auto& e : take_events()) {
      if (std::string(e.name) == "n") seen.push_back(e.value);
    }
  };
  while (!done) collect();
  writer.join();
  collect();
  ASSERT_EQ(seen.size(), size_t(kEvents));
  std::sort(seen.begin(), seen.end());
  for (int i = 0; i < kEvents; ++i) ASSERT_EQ(seen[i], double(i));
  EXPECT_EQ(dropped_events(), 0);
}

TEST_F(TraceTest, ClearDropsEvents) {
  set_active(true);
  { Scope s("x", "phase"); }
  clear();
  EXPECT_TRUE(take_events().empty());
}

// A device's track (a GPU's kernels): its own tid and name, shared by name,
// distinct from every thread's; its events carry it whichever thread records.
TEST_F(TraceTest, NamedTracksHaveTheirOwnTidAndName) {
  set_active(true);
  const int gpu = named_track("cuda:0 kernels (test)");
  EXPECT_EQ(named_track("cuda:0 kernels (test)"), gpu);
  const int other = named_track("cuda:1 kernels (test)");
  EXPECT_NE(other, gpu);
  record_complete("host", "kernel", now_ns(), now_ns() + 5);
  const int64_t t0 = now_ns();
  record_complete_on(gpu, "gemm", "gpu", t0, t0 + 1000);
  std::thread([&] { record_complete_on(gpu, "attention", "gpu", t0 + 1000, t0 + 3000); }).join();
  auto ev = take_events();
  const Event* host = find(ev, "host");
  const Event* gemm = find(ev, "gemm");
  const Event* attention = find(ev, "attention");
  ASSERT_TRUE(host && gemm && attention);
  EXPECT_NE(host->tid, gpu);
  EXPECT_EQ(gemm->tid, gpu);
  EXPECT_EQ(attention->tid, gpu);
  EXPECT_EQ(gemm->dur_ns, 1000);
  EXPECT_EQ(attention->ts_ns - gemm->ts_ns, 1000);
  std::map<int, std::string> names;
  for (auto& [tid, name] : thread_names()) names[tid] = name;
  EXPECT_EQ(names[gpu], "cuda:0 kernels (test)");
  EXPECT_EQ(names[other], "cuda:1 kernels (test)");
  set_active(false);
  record_complete_on(gpu, "late", "gpu", t0, t0 + 1);
  EXPECT_TRUE(take_events().empty());
}

}  // namespace
}  // namespace crucible::trace
