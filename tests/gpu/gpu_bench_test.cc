// `crucible bench step --device cuda` and the GPU's measured ceilings
// (profile/gpu_ceiling.h) and kernel times (kernels/kernel_timer.h): the
// figures a user quotes are bounded by what could be true, and the refusal
// without a GPU is one line and exit 2 (that one runs in CI).
#include <gtest/gtest.h>

#include <string>

#include "core/trace.h"
#include "gpu/gpu_support.h"
#include "kernels/cuda/cuda.h"
#include "kernels/device_scope.h"
#include "kernels/kernels.h"
#include "profile/gpu_ceiling.h"
#include "support/cli_runner.h"

namespace crucible::e2e {
namespace {

nlohmann::json json_of(const CliResult& r) {
  const size_t at = r.output.find('{');
  return at == std::string::npos ? nlohmann::json() : nlohmann::json::parse(r.output.substr(at), nullptr, false);
}

TEST(GpuBench, WithoutAGpuBenchStepIsOneLineAndExit2) {
  if (kernels::cuda::device_count() > 0) GTEST_SKIP() << "this machine has a GPU: the refusal is not reachable";
  auto r = run_crucible({"bench", "step", "--workload", "tiny", "--device", "cuda", "--steps", "1"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("[bench] --device cuda:0"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
  auto k = run_crucible({"bench", "step", "--device", "cuda", "--kernels", "avx2"});
  EXPECT_EQ(k.code, 2) << k.output;
  EXPECT_NE(k.output.find("--kernels picks a CPU kernel table"), std::string::npos) << k.output;
  auto d = run_crucible({"bench", "step", "--device", "tpu"});
  EXPECT_EQ(d.code, 2) << d.output;
  EXPECT_NE(d.output.find("[bench] --device"), std::string::npos) << d.output;
}

// The ceilings under datasheet bounds that no GPU of 2026 exceeds (a ceiling
// above them is a broken measurement), and above a floor any datacenter GPU
// clears (a ceiling below it would inflate every MFU quoted against it).
TEST(GpuBench, CeilingsAreWithinPhysicalBounds) {
  REQUIRE_GPU();
  auto c = profile::measure_gpu_ceiling(Device::cuda(0), 4096);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_GT(c->bf16_gemm_tflops, 50.0);
  EXPECT_LT(c->bf16_gemm_tflops, 2500.0);  // B200's dense bf16 is 2250
  EXPECT_GT(c->f32_gemm_tflops, 5.0);
  EXPECT_LT(c->f32_gemm_tflops, c->bf16_gemm_tflops);
  EXPECT_GT(c->copy_gbs, 300.0);
  EXPECT_LT(c->copy_gbs, 8000.0);  // HBM3e: 4.8 TB/s (H200), 8 TB/s (B200)
}

// CUDA-event kernel times: every kernel counted, each one's time positive
// and their sum no more than the wall time around them; on the trace, on the
// GPU's own track.
TEST(GpuBench, KernelTimesComeFromTheDeviceAndSitOnItsTrack) {
  REQUIRE_GPU();
  const size_t n = size_t(1) << 24;
  gpu_test::DeviceBuffer<float> x(n), y(n);
  reset_kernel_stats();
  trace::clear();
  trace::set_active(true);
  ASSERT_TRUE(kernels::cuda::set_kernel_timing(true).is_ok());
  int64_t wall = 0;
  {
    kernels::DeviceScope on(Device::cuda(0));
    ASSERT_TRUE(kernels::cuda::synchronize(nullptr).is_ok());
    const int64_t t0 = now_ns();
    for (int i = 0; i < 10; ++i) kernels::add(y.get(), x.get(), y.get(), n);
    auto t = kernels::cuda::collect_kernel_times(nullptr);
    wall = now_ns() - t0;
    ASSERT_TRUE(t.is_ok()) << t.status().message();
    EXPECT_EQ(t->kernels, 10);
    EXPECT_EQ(t->dropped, 0);
    EXPECT_GT(t->kernel_ns, 0);
    EXPECT_LE(t->kernel_ns, wall);
  }
  ASSERT_TRUE(kernels::cuda::set_kernel_timing(false).is_ok());
  trace::set_active(false);
  const KernelClassStats& other = kernel_stats()[size_t(KernelClass::other)];
  EXPECT_EQ(other.calls, 10);
  EXPECT_GT(other.ns, 0);
  EXPECT_LE(other.ns, wall);
  int on_track = 0;
  const int track = trace::named_track("cuda:0 kernels");
  for (const trace::Event& e : trace::take_events())
    if (e.tid == track) {
      ++on_track;
      EXPECT_STREQ(e.cat, "gpu");
    }
  EXPECT_EQ(on_track, 10);
}

// What a user runs: the step benchmark on the GPU, its MFU at most 1 of the
// GEMM rate it measured, its kernel classes within the step.
TEST(GpuBench, BenchStepOnTheGpuIsBoundedByItsOwnCeiling) {
  REQUIRE_GPU();
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    auto r = run_crucible({"bench", "step", "--workload", "tiny", "--device", "cuda", "--steps", "5",
                           "--precision", precision, "--json"});
    ASSERT_EQ(r.code, 0) << r.output;
    const auto j = json_of(r);
    ASSERT_TRUE(j.is_object()) << r.output;
    EXPECT_EQ(j["device"], "cuda:0");
    ASSERT_FALSE(j["mfu"].is_null()) << r.output;
    EXPECT_GT(j["mfu"].get<double>(), 0.0);
    EXPECT_LE(j["mfu"].get<double>(), 1.0);
    EXPECT_LT(j["loss_last"].get<double>(), j["loss_first"].get<double>());
    EXPECT_EQ(j["steady_state_allocs"].get<int>(), 0);
    double sum = 0;
    for (auto& [name, k] : j["kernels"].items())
      if (name != "unaccounted") sum += k["ms_per_step"].get<double>();
    EXPECT_GT(sum, 0.0);
    EXPECT_LE(sum, 1.05 * j["ms_per_step"].get<double>());
    // The parts of the steps as the trainer runs them, replayed from a graph
    // that times them (its own event record nodes), in GPU time: each
    // positive, together within the replayed step.
    EXPECT_EQ(j.value("parts_from", ""), "replayed") << j.value("graph_unsplit", j.value("graph_refusal", ""));
    double parts = 0;
    for (const char* k : {"forward_ms", "backward_ms", "optimizer_ms"}) {
      EXPECT_GT(j[k].get<double>(), 0.0) << k;
      parts += j[k].get<double>();
    }
    EXPECT_LE(parts, j.value("parts_from", "") == "replayed" ? j["graph_ms"].get<double>()
                                                             : j["launched_ms"].get<double>());
  }
}

}  // namespace
}  // namespace crucible::e2e
