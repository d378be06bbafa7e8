#include "profile/run_schema.h"

#include <gtest/gtest.h>

#include "support/files.h"

namespace crucible::profile {
namespace {

using nlohmann::json;

std::string why(const Status& s) { return s.is_ok() ? "ok" : s.message(); }

json plan_seed(const std::string& name) {
  return json::parse(
      testutil::read_file(std::string(CRUCIBLE_SOURCE_DIR) + "/fuzz/corpus/plan_json/" + name));
}

TEST(RunSchema, PlanDocument) {
  EXPECT_EQ(why(check_plan_document(plan_seed("predicted.json"), "[report]", "R/plan.json")), "ok");
  EXPECT_EQ(why(check_plan_document(plan_seed("no_cluster.json"), "[report]", "R/plan.json")),
            "ok");
  EXPECT_EQ(why(check_plan_document(plan_seed("regression-breakdown-array.json"), "[report]",
                                    "R/plan.json")),
            "[report] R/plan.json: breakdown must be an object, not an array");
  EXPECT_EQ(why(check_plan_document(plan_seed("regression-cluster-name-5.json"), "[report]",
                                    "R/plan.json")),
            "[report] R/plan.json: cluster.name must be a string, not an integer");
  json p = plan_seed("predicted.json");
  p["breakdown"]["forward"] = -0.5;
  EXPECT_NE(why(check_plan_document(p, "[report]", "R/plan.json"))
                .find("breakdown.forward = -0.5 is out of range"),
            std::string::npos);
  p = plan_seed("predicted.json");
  p["layout"]["devices"] = "1";
  EXPECT_NE(why(check_plan_document(p, "[report]", "R/plan.json"))
                .find("layout.devices must be an integer"),
            std::string::npos);
  p = plan_seed("predicted.json");
  p["cuda_graphs"] = true;  // a GPU run's own prediction says whether its step is a graph
  EXPECT_EQ(why(check_plan_document(p, "[report]", "R/plan.json")), "ok");
  p["cuda_graphs"] = 1;
  EXPECT_EQ(why(check_plan_document(p, "[report]", "R/plan.json")),
            "[report] R/plan.json: cuda_graphs must be true or false, not an integer");
  EXPECT_NE(why(check_plan_document(json::array(), "[report]", "R/plan.json"))
                .find("the document must be an object"),
            std::string::npos);
}

TEST(RunSchema, MetricsRow) {
  const json row =
      json::parse(R"({"step": 3, "loss": 4.5, "lr": 0.001, "step_ms": 12.5, "forward_ms": 4,
                                   "tokens_per_s": 1000, "mfu": 0.2, "mem_peak": 1048576})");
  EXPECT_EQ(why(check_metrics_row(row, "[plan]", "R/metrics.jsonl:3")), "ok");
  json diverged = row;
  diverged["loss"] = nullptr, diverged["tokens_per_s"] = nullptr;  // NaN / inf as written
  EXPECT_EQ(why(check_metrics_row(diverged, "[plan]", "R/metrics.jsonl:3")), "ok");
  json bad = row;
  bad["step_ms"] = 1e308;
  EXPECT_EQ(why(check_metrics_row(bad, "[plan]", "R/metrics.jsonl:3")),
            "[plan] R/metrics.jsonl:3: step_ms = 1e+308 is out of range [0, 1e+09]");
  json graphed = row;  // a step replayed from a CUDA graph
  graphed["graph_ms"] = 9.5;
  EXPECT_EQ(why(check_metrics_row(graphed, "[plan]", "R/metrics.jsonl:3")), "ok");
  graphed["graph_ms"] = -1;
  EXPECT_NE(why(check_metrics_row(graphed, "[plan]", "M")).find("graph_ms = -1 is out of range"),
            std::string::npos);
  bad = row, bad["step_ms"] = nullptr;
  EXPECT_NE(why(check_metrics_row(bad, "[plan]", "M")).find("step_ms must be a number, not null"),
            std::string::npos);
  bad = row, bad["step"] = "3";
  EXPECT_NE(why(check_metrics_row(bad, "[plan]", "M")).find("step must be an integer"),
            std::string::npos);
  bad = row, bad.erase("step");
  EXPECT_NE(why(check_metrics_row(bad, "[plan]", "M")).find("step is missing"), std::string::npos);
  bad = row, bad["mem_peak"] = -1;
  EXPECT_NE(why(check_metrics_row(bad, "[plan]", "M")).find("mem_peak = -1 is out of range"),
            std::string::npos);
}

TEST(RunSchema, TheReportsOtherInputs) {
  EXPECT_EQ(why(check_memory_estimate(json::parse(R"({"precision": "bf16", "weights": 1048576})"), "[report]", "M")),
            "ok");
  EXPECT_EQ(why(check_memory_estimate(json::parse(R"({"weights": "x"})"), "[report]", "R/memory.json")),
            "[report] R/memory.json: weights must be a number, not a string");
  EXPECT_EQ(why(check_kernels(json::parse(R"([{"class": "matmul", "flops": 2e9, "bytes": 1e7, "seconds": 0.02}])"),
                              "[report]", "K")),
            "ok");
  EXPECT_EQ(why(check_kernels(json::parse("[5]"), "[report]", "R/kernels.json")),
            "[report] R/kernels.json: [0] must be an object, not an integer");
  EXPECT_EQ(why(check_kernels(json::parse(R"([{"class": 5}])"), "[report]", "R/kernels.json")),
            "[report] R/kernels.json: [0].class must be a string, not an integer");
  EXPECT_EQ(why(check_kernels(json::parse(R"({"class": "x"})"), "[report]", "R/kernels.json")),
            "[report] R/kernels.json: the document must be an array, not an object");
  EXPECT_EQ(why(check_event_row(json::parse(R"({"time": "t", "t_s": 5, "event": "failure", "attempt": 0,
                                                "step": 5, "resume_step": -1, "message": "m"})"),
                                "[report]", "E")),
            "ok");
  EXPECT_EQ(why(check_event_row(json::parse(R"({"event": 5})"), "[report]", "R/events.jsonl row 2")),
            "[report] R/events.jsonl row 2: event must be a string, not an integer");
}

}  // namespace
}  // namespace crucible::profile
