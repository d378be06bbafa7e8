// MetricsWriter on resume: metrics.jsonl is cut back to the checkpoint's step,
// and the checkpoint's own row is put back when the kill came between
// publishing the checkpoint and writing its row.
#include "runtime/metrics.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "support/cli_runner.h"
#include "support/files.h"

namespace crucible::runtime {
namespace {


std::string rows(int from, int to) {
  std::string s;
  for (int i = from; i <= to; ++i) s += "{\"step\":" + std::to_string(i) + ",\"loss\":1}\n";
  return s;
}

TEST(MetricsWriter, ResumeCutsBackAndRestoresTheCheckpointsRow) {
  testutil::TempDir dir("metrics_restore");
  const std::string path = dir / "metrics.jsonl";
  StepMetrics m;
  m.step = 10;
  m.loss = 2.5;
  {  // killed after step_0000010 was published, before its row was written
    testutil::write_file(path, rows(1, 9));
    MetricsWriter w;
    ASSERT_TRUE(w.open(path, 10, to_json(m)).is_ok());
  }
  std::vector<int64_t> want(10);
  for (int i = 0; i < 10; ++i) want[size_t(i)] = i + 1;
  EXPECT_EQ(e2e::metric_steps(dir.path()), want);
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(testutil::read_file(path).substr(
                       testutil::read_file(path).rfind("{\"")))["loss"].get<double>(),
                   2.5);
  {  // the row made it, and steps past the checkpoint (a lost timeline) go
    testutil::write_file(path, rows(1, 13));
    MetricsWriter w;
    ASSERT_TRUE(w.open(path, 10, to_json(m)).is_ok());
  }
  EXPECT_EQ(e2e::metric_steps(dir.path()), want);
  {  // torn, foreign and repeated lines are dropped, never a crash
    testutil::write_file(path, rows(1, 5) + "{\"step\": \"x\"}\n" + rows(5, 9) + "{\"step\":1");
    MetricsWriter w;
    ASSERT_TRUE(w.open(path, 10, to_json(m)).is_ok());
  }
  EXPECT_EQ(e2e::metric_steps(dir.path()), want);
}

}  // namespace
}  // namespace crucible::runtime
