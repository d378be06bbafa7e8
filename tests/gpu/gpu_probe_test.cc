// `crucible probe`'s gpu section on a real GPU: every figure inside what the
// part could physically do (a measurement above its datasheet is a broken
// measurement), the sustained load's power under the enforced limit, and the
// section written to probe.json and compared like the CPU's.
#include <gtest/gtest.h>

#include "gpu/gpu_support.h"
#include "profile/probe_gpu.h"
#include "support/cli_runner.h"

namespace crucible::e2e {
namespace {

TEST(GpuProbe, EveryFigureIsWithinPhysicalBounds) {
  REQUIRE_GPU();
  profile::GpuProbeOptions opt;
  opt.load_s = 5;
  const nlohmann::json g = profile::probe_gpu(opt);
  std::printf("%s", profile::gpu_table(g).c_str());
  ASSERT_GE(g["count"].get<int>(), 1) << g.dump();
  const nlohmann::json& d = g["devices"][0];
  ASSERT_FALSE(d.contains("error")) << d.dump();
  // Dense bf16 of the largest 2026 part (B200: 2250 TFLOP/s); H100/H200: 989.
  EXPECT_GT(d["bf16_gemm_tflops"].get<double>(), 50);
  EXPECT_LT(d["bf16_gemm_tflops"].get<double>(), 2500);
  EXPECT_LT(d["f32_gemm_tflops"].get<double>(), d["bf16_gemm_tflops"].get<double>());
  // TF32 runs on the tensor cores at half bf16's dense rate (H100/H200: 495
  // of 989 TFLOP/s): above f32 on CUDA cores, below bf16.
  EXPECT_GT(d["tf32_gemm_tflops"].get<double>(), d["f32_gemm_tflops"].get<double>());
  EXPECT_LT(d["tf32_gemm_tflops"].get<double>(), d["bf16_gemm_tflops"].get<double>());
  // The transformer-step shapes, the three precisions: positive, under the
  // part's peak, and bf16 faster than tf32 faster than f32 at each shape.
  ASSERT_EQ(d["gemm"].size(), 30u);
  for (size_t i = 0; i + 2 < d["gemm"].size(); i += 3) {
    const auto& b = d["gemm"][i];
    const auto& f = d["gemm"][i + 1];
    const auto& t = d["gemm"][i + 2];
    EXPECT_EQ(b["dtype"], "bf16");
    EXPECT_EQ(f["dtype"], "f32");
    EXPECT_EQ(t["dtype"], "tf32");
    EXPECT_GT(f["tflops"].get<double>(), 0);
    EXPECT_LT(b["tflops"].get<double>(), 2500);
    EXPECT_GT(b["tflops"].get<double>(), t["tflops"].get<double>()) << b.dump();
    EXPECT_GT(t["tflops"].get<double>(), f["tflops"].get<double>()) << t.dump();
  }
  EXPECT_GT(d["copy_gbs"].get<double>(), 300);
  EXPECT_LT(d["copy_gbs"].get<double>(), 8000);  // HBM3e: 4.8 TB/s (H200), 8 TB/s (B200)
  // GPU to GPU: one GPU says why there is nothing to measure; several are
  // below NVLink 5's 900 GB/s one way, and above PCIe 3.0 x16's floor.
  if (g["count"].get<int>() < 2) {
    EXPECT_TRUE(g.contains("peers_why")) << g.dump();
  } else {
    ASSERT_TRUE(g.contains("peers")) << g.dump();
    const int n = g["count"].get<int>();
    EXPECT_EQ(g["peers"].size(), size_t(n) * size_t(n - 1));
    for (const auto& p : g["peers"]) {
      EXPECT_GT(p["gbs"].get<double>(), 5) << p.dump();
      EXPECT_LT(p["gbs"].get<double>(), 900) << p.dump();
    }
  }
  // PCIe 5.0 x16 moves 63 GB/s each way; NVLink-C2C (GH200) 450.
  for (const char* k :
       {"h2d_pinned_gbs", "d2h_pinned_gbs", "h2d_pageable_gbs", "d2h_pageable_gbs"}) {
    EXPECT_GT(d[k].get<double>(), 1) << k;
    EXPECT_LT(d[k].get<double>(), 500) << k;
  }
  EXPECT_GT(d["launch_us"].get<double>(), 0.3);
  EXPECT_LT(d["launch_us"].get<double>(), 100);
  ASSERT_TRUE(d.contains("load")) << d.dump();
  const nlohmann::json& l = d["load"];
  EXPECT_LE(l["bf16_tflops"].get<double>(), 1.05 * d["bf16_gemm_tflops"].get<double>());
  if (d.contains("nvml")) {
    const double limit = d["nvml"]["power_limit_w"].get<double>();
    ASSERT_TRUE(l.contains("mean_power_w")) << l.dump();
    EXPECT_GT(l["mean_power_w"].get<double>(), 0);
    if (limit > 0) {
      EXPECT_LE(l["mean_power_w"].get<double>(), 1.05 * limit);
    }
    EXPECT_LE(l["last_sm_clock_mhz"].get<double>(),
              d["nvml"]["max_sm_clock_mhz"].get<double>() + 1);
  }
}

TEST(GpuProbe, TheCliWritesAndComparesTheSection) {
  REQUIRE_GPU();
  TempDir dir("gpu_probe_cli");
  auto r = run_crucible({"probe", "--quick", "--sections", "gpu", "--json", dir / "p.json"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("GPUs\n  cuda:0"), std::string::npos) << r.output;
  auto same = run_crucible({"probe", "--compare", dir / "p.json", dir / "p.json"});
  ASSERT_EQ(same.code, 0) << same.output;
  EXPECT_NE(same.output.find("gpu 0 GEMM bf16"), std::string::npos) << same.output;
}

}  // namespace
}  // namespace crucible::e2e
