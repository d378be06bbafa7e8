#include "profile/trace_file.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "support/files.h"

namespace crucible::profile {
namespace {

using nlohmann::json;
using testutil::read_file;
using testutil::TempDir;
using testutil::write_file;

class TraceFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    trace::set_active(false);
    trace::clear();
  }
  void TearDown() override {
    trace::set_active(false);
    trace::clear();
  }
};

// A step-like nest on the calling thread: step > {forward > gemm, backward}.
void record_step() {
  trace::Scope step("step", "phase");
  {
    trace::Scope fwd("forward", "phase");
    trace::Scope k("gemm", "kernel");
  }
  trace::Scope bwd("backward", "phase");
  trace::counter("mem_in_use", 1024);
}

json event(const std::string& name, const std::string& ph, double ts, int tid = 1) {
  return {{"name", name}, {"ph", ph}, {"ts", ts}, {"pid", 0}, {"tid", tid}};
}
json complete(const std::string& name, double ts, double dur, int tid = 1) {
  json e = event(name, "X", ts, tid);
  e["dur"] = dur;
  return e;
}
json doc_of(const json& events) { return {{"traceEvents", events}}; }

TEST_F(TraceFileTest, ScopesOnTwoThreadsMakeAValidFile) {
  TempDir dir(testutil::current_test_name());
  trace::set_active(true);
  std::thread other([] {
    trace::set_thread_name("ckpt writer");
    trace::Scope save("save", "ckpt");
    { trace::Scope w("write", "ckpt"); }
  });
  record_step();
  record_step();
  other.join();
  auto events = trace::take_events();
  ASSERT_EQ(events.size(), 2u * 5 + 2);
  const std::string path = dir / "rank0.trace.json";
  ASSERT_TRUE(write_rank_trace(path, 0, "train", events).is_ok());
  Status s = validate_trace_file(path);
  EXPECT_TRUE(s.is_ok()) << s.message();

  json doc = json::parse(read_file(path));
  std::set<int> tids;
  std::set<std::string> thread_names;
  std::string process_name;
  for (const auto& e : doc["traceEvents"]) {
    EXPECT_EQ(e["pid"], 0);
    if (e["ph"] == "M" && e["name"] == "process_name") process_name = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "thread_name")
      thread_names.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X") tids.insert(e["tid"].get<int>());
  }
  EXPECT_EQ(process_name, "rank 0 (train)");
  EXPECT_EQ(tids.size(), 2u);
  EXPECT_TRUE(thread_names.count("ckpt writer"));
}

TEST_F(TraceFileTest, MergeGivesOneProcessPerRank) {
  TempDir dir(testutil::current_test_name());
  trace::set_active(true);
  record_step();
  auto events = trace::take_events();
  ASSERT_TRUE(write_rank_trace(dir / "r0.json", 0, "dp", events).is_ok());
  ASSERT_TRUE(write_rank_trace(dir / "r1.json", 1, "dp", events).is_ok());
  const std::string out = dir / "trace.json";
  Status s = merge_traces({dir / "r0.json", dir / "r1.json"}, out);
  ASSERT_TRUE(s.is_ok()) << s.message();
  json doc = json::parse(read_file(out));
  ASSERT_TRUE(validate_trace(doc).is_ok());
  std::set<int> pids;
  std::set<std::string> processes;
  size_t x_events = 0;
  for (const auto& e : doc["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["name"] == "process_name") processes.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X") ++x_events;
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  EXPECT_EQ(processes, (std::set<std::string>{"rank 0 (dp)", "rank 1 (dp)"}));
  EXPECT_EQ(x_events, 2 * 4u);
}

TEST_F(TraceFileTest, MergeRefusesTwoFilesOfOneRank) {
  TempDir dir(testutil::current_test_name());
  ASSERT_TRUE(write_rank_trace(dir / "a.json", 3, "", {}).is_ok());
  ASSERT_TRUE(write_rank_trace(dir / "b.json", 3, "", {}).is_ok());
  Status s = merge_traces({dir / "a.json", dir / "b.json"}, dir / "out.json");
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("pid 3"), std::string::npos) << s.message();
}

TEST_F(TraceFileTest, MergeNamesTheInvalidInput) {
  TempDir dir(testutil::current_test_name());
  ASSERT_TRUE(write_rank_trace(dir / "a.json", 0, "", {}).is_ok());
  write_file(dir / "b.json", doc_of(json::array({complete("x", 0, -1)})).dump());
  Status s = merge_traces({dir / "a.json", dir / "b.json"}, dir / "out.json");
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("b.json"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("negative"), std::string::npos) << s.message();
}

TEST_F(TraceFileTest, NestedAndTouchingCompleteEventsAreValid) {
  json ev =
      json::array({complete("step", 0, 100), complete("forward", 0, 40), complete("gemm", 10, 20),
                   complete("backward", 40, 60), complete("other thread", 30, 100, /*tid=*/2)});
  Status s = validate_trace(doc_of(ev));
  EXPECT_TRUE(s.is_ok()) << s.message();
}

TEST_F(TraceFileTest, RoundingWithinOneMicrosecondIsTolerated) {
  json ev = json::array({complete("step", 0, 100), complete("optimizer", 90, 10.8)});
  EXPECT_TRUE(validate_trace(doc_of(ev)).is_ok());
}

TEST_F(TraceFileTest, OverlappingCompleteEventsFailNamingTheEvent) {
  json ev = json::array({complete("forward", 0, 50), complete("backward", 40, 50)});
  Status s = validate_trace(doc_of(ev));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("event 1 (\"backward\""), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("\"forward\""), std::string::npos) << s.message();
}

TEST_F(TraceFileTest, UnbalancedBeginEndFails) {
  {
    json ev = json::array({event("a", "B", 0), event("b", "B", 1), event("b", "E", 2)});
    Status s = validate_trace(doc_of(ev));
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("event 0 (\"a\""), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("never closed"), std::string::npos) << s.message();
  }
  {
    json ev = json::array({event("a", "B", 0), event("a", "E", 2), event("a", "E", 3)});
    Status s = validate_trace(doc_of(ev));
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("event 2"), std::string::npos) << s.message();
  }
  {  // crossed: a opens, b opens, a closes first
    json ev = json::array(
        {event("a", "B", 0), event("b", "B", 1), event("a", "E", 2), event("b", "E", 3)});
    Status s = validate_trace(doc_of(ev));
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("event 2"), std::string::npos) << s.message();
  }
  {  // the same B/E on different threads do not pair up
    json ev = json::array({event("a", "B", 0, 1), event("a", "E", 2, 2)});
    EXPECT_FALSE(validate_trace(doc_of(ev)).is_ok());
  }
}

TEST_F(TraceFileTest, MissingFieldFailsNamingTheEvent) {
  json bad = complete("forward", 5, 1);
  bad.erase("tid");
  json ev = json::array({complete("step", 0, 10), bad});
  Status s = validate_trace(doc_of(ev));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("event 1 (\"forward\""), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("\"tid\""), std::string::npos) << s.message();

  json no_dur = event("x", "X", 0);
  EXPECT_FALSE(validate_trace(doc_of(json::array({no_dur}))).is_ok());
}

TEST_F(TraceFileTest, MetadataMustBePhaseM) {
  json ev = json::array({event("process_name", "X", 0)});
  ev[0]["dur"] = 1;
  Status s = validate_trace(doc_of(ev));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("metadata"), std::string::npos) << s.message();

  json m = event("forward", "M", 0);
  m["args"] = {{"name", "x"}};
  EXPECT_FALSE(validate_trace(doc_of(json::array({m}))).is_ok());
  EXPECT_FALSE(validate_trace(json{{"events", json::array()}}).is_ok());
}

TEST_F(TraceFileTest, UnreadableFileIsAnError) {
  TempDir dir(testutil::current_test_name());
  write_file(dir / "t.json", "{\"traceEvents\":[");
  Status s = validate_trace_file(dir / "t.json");
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("not valid JSON"), std::string::npos) << s.message();
  EXPECT_FALSE(validate_trace_file(dir / "missing.json").is_ok());
}

}  // namespace
}  // namespace crucible::profile
