#include "core/json_schema.h"

#include <gtest/gtest.h>

#include <cmath>

namespace crucible {
namespace {

using nlohmann::json;
using Need = JsonSchema::Need;

std::string why(const Status& s) { return s.is_ok() ? "ok" : s.message(); }

const JsonSchema kPlan("[report]", "runs/x/plan.json");

TEST(JsonSchema, NamesTheFileAndTheFieldInOneLine) {
  const json doc =
      json::parse(R"({"breakdown": [1, 2], "step_time_s": 1e308, "cluster": {"name": 5}})");
  EXPECT_EQ(why(kPlan.object(doc, "breakdown")),
            "[report] runs/x/plan.json: breakdown must be an object, not an array");
  EXPECT_EQ(why(kPlan.number(doc, "step_time_s", 0, 1e6)),
            "[report] runs/x/plan.json: step_time_s = 1e+308 is out of range [0, 1e+06]");
  EXPECT_EQ(why(kPlan.string(doc, "cluster.name")),
            "[report] runs/x/plan.json: cluster.name must be a string, not an integer");
  EXPECT_EQ(why(kPlan.object(json(5), "")),
            "[report] runs/x/plan.json: the document must be an object, not an integer");
}

TEST(JsonSchema, AbsentPassesUnlessRequired) {
  const json doc = json::parse(R"({"a": {}})");
  EXPECT_TRUE(kPlan.number(doc, "missing", 0, 1).is_ok());
  EXPECT_TRUE(kPlan.number(doc, "a.b.c", 0, 1).is_ok());
  EXPECT_EQ(why(kPlan.number(doc, "a.b", 0, 1, Need::kRequired)),
            "[report] runs/x/plan.json: a.b is missing");
  // A value on the way that is not an object is the error, not "absent".
  EXPECT_EQ(why(kPlan.number(json::parse(R"({"a": 5})"), "a.b", 0, 1)),
            "[report] runs/x/plan.json: a must be an object");
}

TEST(JsonSchema, NumbersMustBeFiniteAndInRange) {
  json doc =
      json::parse(R"({"neg": -1, "str": "2", "ok": 3, "null": null, "big": 18446744073709551615})");
  doc["inf"] = INFINITY;  // computed in memory (a file's 1e999 does not parse)
  doc["nan"] = NAN;
  EXPECT_NE(why(kPlan.number(doc, "inf", 0, 1e30)).find("inf is out of range"), std::string::npos);
  EXPECT_NE(why(kPlan.number(doc, "nan", 0, 1e30)).find("nan is out of range"), std::string::npos);
  EXPECT_NE(why(kPlan.number(doc, "neg", 0, 10)).find("= -1 is out of range [0, 10]"),
            std::string::npos);
  EXPECT_NE(why(kPlan.number(doc, "str", 0, 10)).find("str must be a number, not a string"),
            std::string::npos);
  EXPECT_NE(why(kPlan.number(doc, "null", 0, 10)).find("must be a number, not null"),
            std::string::npos);
  EXPECT_TRUE(kPlan.number(doc, "ok", 0, 10).is_ok());
  EXPECT_TRUE(kPlan.integer(doc, "ok", 0, 10).is_ok());
  EXPECT_NE(why(kPlan.integer(doc, "ok", 4, 10)).find("= 3 is out of range [4, 10]"),
            std::string::npos);
  EXPECT_NE(why(kPlan.integer(doc, "big", 0, INT64_MAX)).find("out of range"), std::string::npos);
  EXPECT_NE(why(kPlan.integer(json::parse(R"({"f": 2.5})"), "f", 0, 10))
                .find("must be an integer, not a number"),
            std::string::npos);
}

TEST(JsonSchema, ElementsAreNamedByIndex) {
  const json doc = json::parse(R"({"compute": {"gemm": [{"gflops": 1}, 7, {"gflops": 1e308}]}})");
  auto row = [](const json& g, const JsonSchema& at) {
    CRUCIBLE_RETURN_IF_ERROR(at.object(g, ""));
    return at.number(g, "gflops", 0, 1e8);
  };
  const JsonSchema probe("[probe]", "probe.json");
  EXPECT_EQ(why(probe.each(doc, "compute.gemm", row)),
            "[probe] probe.json: compute.gemm[1] must be an object, not an integer");
  json fixed = doc;
  fixed["compute"]["gemm"][1] = json::object();
  EXPECT_EQ(why(probe.each(fixed, "compute.gemm", row)),
            "[probe] probe.json: compute.gemm[2].gflops = 1e+308 is out of range [0, 1e+08]");
  EXPECT_EQ(why(probe.within(
                fixed, "compute",
                [&](const json& c, const JsonSchema& at) { return at.each(c, "gemm", row); })),
            "[probe] probe.json: compute.gemm[2].gflops = 1e+308 is out of range [0, 1e+08]");
  EXPECT_EQ(why(probe.each(json::parse(R"({"compute": {"gemm": 5}})"), "compute.gemm", row)),
            "[probe] probe.json: compute.gemm must be an array, not an integer");
}

}  // namespace
}  // namespace crucible
