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

}  // namespace
}  // namespace crucible::profile
