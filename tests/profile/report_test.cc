#include "profile/report.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "support/files.h"

namespace crucible::profile {
namespace {

using testutil::TempDir;
using testutil::write_file;

// A small synthetic run: 6 steps (eval at 3 and 6, checkpoint at 4), two
// ranks, a failure and a restart, probe, kernels and scaling files.
void write_run(const TempDir& d) {
  write_file(d / "config.toml",
             "[model]\nn_layer = 2\nn_embd = 64\n[train]\nsteps = 6\nbatch_size = 4\n[optim]\nlr = "
             "0.002\nweight_decay = 0.1\n");
  std::string m;
  for (int s = 1; s <= 6; ++s) {
    m += "{\"step\":" + std::to_string(s) + ",\"loss\":" + std::to_string(5.0 - 0.3 * s) +
         ",\"lr\":" + std::to_string(0.0004 * s) +
         ",\"grad_norm\":1.0,\"tokens_per_s\":" + std::to_string(1000 + 10 * s) +
         ",\"mfu\":0.4,\"step_ms\":100,\"data_wait_ms\":5,"
         "\"forward_ms\":30,\"backward_ms\":50,\"optimizer_ms\":8,\"comm_ms\":4,"
         "\"mem_in_use\":" +
         std::to_string(100 << 20) + ",\"mem_peak\":" + std::to_string(150 << 20);
    if (s % 3 == 0) m += ",\"val_loss\":" + std::to_string(5.1 - 0.3 * s) + ",\"eval_ms\":20";
    if (s == 4) m += ",\"ckpt_stall_ms\":12.5,\"ckpt_wait_ms\":2,\"ckpt_write_ms\":40";
    m += "}\n";
  }
  write_file(d / "metrics.jsonl", m);
  for (int r = 0; r < 2; ++r)
    write_file(d / ("metrics.rank" + std::to_string(r) + ".jsonl"),
               "{\"step\":1,\"step_ms\":100,\"data_wait_ms\":" + std::to_string(5 + r) +
                   ",\"forward_ms\":30,\"backward_ms\":50,\"optimizer_ms\":8,\"comm_ms\":4}\n");
  write_file(
      d / "events.jsonl",
      "{\"time\":\"2026-01-01T00:00:00\",\"t_s\":0,\"event\":\"job_start\"}\n"
      "{\"time\":\"2026-01-01T00:00:05\",\"t_s\":5,\"event\":\"failure\",\"attempt\":0,\"step\":5,"
      "\"resume_step\":4,\"message\":\"rank 1 died in backward <x>\"}\n"
      "{\"time\":\"2026-01-01T00:00:06\",\"t_s\":6,\"event\":\"restart\",\"attempt\":1,\"resume_"
      "step\":4}\n");
  write_file(
      d / "probe.json",
      R"({"schema":"crucible-probe/1","host":"h","compute":{"peak":{"derived_gflops_all":200},"gemm":[{"name":"square 1024","dtype":"f32","threads":2,"gflops":150,"valid":true}]},
                "memory":{"threads_all":{"triad":{"best_gbs":20}}},
                "storage":[{"dir":"/tmp","filesystem":"ext4","seq_write_gbs":1.5,"seq_read_gbs":2.5,"rand_read_4k_us":{"p50":80}}],
                "interconnect":{"ranks":2,"collectives":{"allreduce":{"comm":[{"bytes":8,"busbw_gbs":0.1},{"bytes":1024,"busbw_gbs":3.5}]}}}})");
  write_file(
      d / "kernels.json",
      R"([{"class":"matmul","flops":2e9,"bytes":1e7,"seconds":0.02},{"class":"layernorm","flops":1e6,"bytes":8e6,"seconds":0.001}])");
  write_file(d / "memory.json",
             R"({"precision":"bf16","recompute":"full","weights":37748736,"gradients":25165824,"optimizer":50331648,
                 "activations":100663296,"other":4206592,"checkpoint_copy":63866880})");
  write_file(
      d / "scaling.json",
      R"({"points":[{"ranks":1,"speedup":1},{"ranks":2,"speedup":1.8},{"ranks":4,"speedup":3.1}],"serial_fraction":0.08})");
}

TEST(Report, RendersEverySectionAndSeries) {
  TempDir d(testutil::current_test_name());
  write_run(d);
  auto html = render_report(d.path());
  ASSERT_TRUE(html.is_ok()) << html.status().message();
  for (const char* id : {"summary", "loss", "lr", "step-time", "throughput", "memory", "ranks",
                         "events", "probe", "roofline", "scaling"})
    EXPECT_NE(html->find(std::string("<section id=\"") + id + "\""), std::string::npos) << id;
  for (const char* s : {"train loss",      "val loss",       "lr",     "data_wait",
                        "forward",         "backward",       "comm",   "optimizer",
                        "other",           "tokens_per_s",   "mfu",    "mem_in_use",
                        "mem_peak",        "rank 0",         "rank 1", "kernels",
                        "compute ceiling", "memory ceiling", "ideal",  "measured",
                        "markers"})
    EXPECT_NE(html->find(std::string("data-series=\"") + s), std::string::npos) << s;
  EXPECT_NE(html->find("data-series=\"amdahl"), std::string::npos);
  // Summary figures and config essentials.
  EXPECT_NE(html->find("model.n_layer"), std::string::npos);
  // Doubles in their shortest text, not toml++'s 17 digits (0.10000000000000001).
  EXPECT_NE(html->find("<th>optim.weight_decay</th><td>0.1</td>"), std::string::npos);
  EXPECT_NE(html->find("<th>optim.lr</th><td>0.002</td>"), std::string::npos);
  EXPECT_NE(html->find("3.2000"), std::string::npos);  // final train loss 5 - 0.3*6
  EXPECT_NE(html->find("best GEMM"), std::string::npos);
  EXPECT_NE(html->find("150 GFLOP/s"), std::string::npos);
  EXPECT_NE(html->find("3.5 GB/s"), std::string::npos);  // best allreduce busbw
  // The failure shows in the table (escaped) and as a marker at step 5.
  EXPECT_NE(html->find("rank 1 died in backward &lt;x&gt;"), std::string::npos);
  EXPECT_EQ(html->find("<x>"), std::string::npos);
  EXPECT_NE(html->find("failure at step 5"), std::string::npos);
  EXPECT_NE(html->find("checkpoint stall 12.5 ms"), std::string::npos);
  // The memory estimate by kind beside the measured peak (memory.json).
  EXPECT_NE(html->find("estimated weights (f32 and the bf16 copy)</th><td>36.0 MiB"), std::string::npos);
  EXPECT_NE(html->find("estimated activations</th><td>96.0 MiB"), std::string::npos);
  EXPECT_NE(html->find("estimated total</th><td>268.9 MiB"), std::string::npos);
  EXPECT_NE(html->find("measured allocator peak</th><td>150.0 MiB"), std::string::npos);
  EXPECT_NE(html->find("bf16, full"), std::string::npos);
}

TEST(Report, SelfContainedAndFinite) {
  TempDir d(testutil::current_test_name());
  write_run(d);
  auto html = render_report(d.path());
  ASSERT_TRUE(html.is_ok()) << html.status().message();
  // No network: the only URL is the SVG namespace.
  const std::string ns = "http://www.w3.org/2000/svg";
  std::string stripped = *html;
  for (size_t p; (p = stripped.find(ns)) != std::string::npos;) stripped.erase(p, ns.size());
  EXPECT_EQ(stripped.find("http://"), std::string::npos);
  EXPECT_EQ(stripped.find("https://"), std::string::npos);
  EXPECT_EQ(stripped.find("<script"), std::string::npos);
  EXPECT_EQ(stripped.find("<link"), std::string::npos);
  // Every number in every SVG is finite.
  std::regex svg_re("<svg[\\s\\S]*?</svg>");
  int svgs = 0;
  for (auto it = std::sregex_iterator(html->begin(), html->end(), svg_re);
       it != std::sregex_iterator(); ++it) {
    ++svgs;
    const std::string s = it->str();
    EXPECT_EQ(s.find("nan"), std::string::npos);
    EXPECT_EQ(s.find("inf"), std::string::npos);
  }
  EXPECT_GE(svgs, 9);
}

// Steps replayed from a CUDA graph (graph_ms): what of it their parts do not
// cover is its own part of the step-time breakdown (all of it where the graph
// does not time its parts: forward, backward and optimizer 0), and a run
// without any has no such part.
TEST(Report, ReplayedStepsAreTheirOwnPartOfTheStep) {
  TempDir d(testutil::current_test_name());
  // Four 10 ms steps: two launched, two replayed with `replayed`'s fields.
  auto write_rows = [&](const std::string& replayed) {
    std::string m;
    for (int s = 1; s <= 4; ++s)
      m += "{\"step\":" + std::to_string(s) + ",\"loss\":4.0,\"step_ms\":10,\"data_wait_ms\":1," +
           (s <= 2 ? "\"forward_ms\":3,\"backward_ms\":5,\"optimizer_ms\":1" : replayed) + "}\n";
    write_file(d / "metrics.jsonl", m);
  };
  write_rows("\"forward_ms\":0,\"backward_ms\":0,\"optimizer_ms\":0,\"graph_ms\":8");
  auto html = render_report(d.path());
  ASSERT_TRUE(html.is_ok()) << html.status().message();
  EXPECT_NE(html->find("data-series=\"cuda graph"), std::string::npos);
  // Half the steps at 8 ms, the others at 0: a mean of 4 ms, 40% of the step.
  EXPECT_NE(html->find("<td>cuda graph (rest)</td><td>4.00</td><td>40.0 %</td>"), std::string::npos);
  // The prediction beside it: the replayed steps' device step against the
  // predicted forward + backward + optimizer (4 + 6 + 1 ms), and no phase
  // measured after the first two steps (an unsplit graph's step has none), not 0.
  write_file(d / "plan.json",
             testutil::read_file(std::string(CRUCIBLE_SOURCE_DIR) + "/fuzz/corpus/plan_json/predicted.json"));
  html = render_report(d.path());
  ASSERT_TRUE(html.is_ok()) << html.status().message();
  EXPECT_NE(html->find("<td>device step (CUDA graph)</td><td>11.0</td><td>8.0</td><td>37.5 %</td>"),
            std::string::npos);
  EXPECT_NE(html->find("<td>forward + backward</td><td>10.0</td><td>-</td><td>-</td>"), std::string::npos);
  EXPECT_NE(html->find("<td>step</td><td>12.5</td><td>10.0</td><td>25.0 %</td>"), std::string::npos);
  // A split graph: its steps' parts are measured (3 + 4 + 1 ms of 9), the
  // rest (1 ms) is the graph's part, and the prediction's phases are theirs.
  write_rows("\"forward_ms\":3,\"backward_ms\":4,\"optimizer_ms\":1,\"graph_ms\":9");
  html = render_report(d.path());
  ASSERT_TRUE(html.is_ok()) << html.status().message();
  EXPECT_NE(html->find("<td>cuda graph (rest)</td><td>0.50</td><td>5.0 %</td>"), std::string::npos);
  EXPECT_NE(html->find("<td>backward</td><td>4.50</td><td>45.0 %</td>"), std::string::npos);
  EXPECT_NE(html->find("<td>forward + backward</td><td>10.0</td><td>7.0</td><td>42.9 %</td>"), std::string::npos);
  EXPECT_NE(html->find("<td>device step (CUDA graph)</td><td>11.0</td><td>9.0</td><td>22.2 %</td>"),
            std::string::npos);
  std::filesystem::remove(d / "plan.json");
  write_run(d);  // no graph_ms anywhere
  html = render_report(d.path());
  ASSERT_TRUE(html.is_ok()) << html.status().message();
  EXPECT_EQ(html->find("cuda graph"), std::string::npos);
}

TEST(Report, OptionalFilesMayBeMissing) {
  TempDir d(testutil::current_test_name());
  write_file(
      d / "metrics.jsonl",
      "{\"step\":1,\"loss\":4.5,\"step_ms\":10}\n{\"step\":2,\"loss\":4.4");  // torn last line
  auto html = render_report(d.path());
  ASSERT_TRUE(html.is_ok()) << html.status().message();
  EXPECT_NE(html->find("<section id=\"loss\""), std::string::npos);
  for (const char* id : {"ranks", "events", "roofline", "scaling"})
    EXPECT_EQ(html->find(std::string("<section id=\"") + id + "\""), std::string::npos) << id;
}

TEST(Report, MissingOrCorruptMetricsIsAnErrorNamingIt) {
  TempDir d(testutil::current_test_name());
  auto r = render_report(d.path());
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("metrics.jsonl"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().rfind("[report]", 0), 0u);
  write_file(d / "metrics.jsonl", "{\"step\":1}\nnot json\n{\"step\":3}\n");
  r = render_report(d.path());
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("metrics.jsonl:2"), std::string::npos)
      << r.status().message();
  write_file(d / "metrics.jsonl", "{\"step\":1}\n");
  write_file(d / "kernels.json", "[{");
  r = render_report(d.path());
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("kernels.json"), std::string::npos) << r.status().message();
}

TEST(Report, WriteReportDefaultsToRunDir) {
  TempDir d(testutil::current_test_name());
  write_run(d);
  ASSERT_TRUE(write_report(d.path()).is_ok());
  const std::string text = testutil::read_file(d / "report.html");
  EXPECT_EQ(text.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(text.find("</html>"), std::string::npos);
  ASSERT_TRUE(write_report(d.path(), d / "other.html").is_ok());
  EXPECT_EQ(testutil::read_file(d / "other.html"), text);
  EXPECT_FALSE(write_report(d.path(), d / "no/such/dir/r.html").is_ok());
}

}  // namespace
}  // namespace crucible::profile
