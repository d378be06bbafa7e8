// A GPU's energy (profile/energy.h over NVML) under a sustained GEMM load:
// the counter is monotone, agrees with the sampled board power × time within
// 10% on a steady load, and the power stays under its enforced limit; a
// training step's row carries joules, power, clock and temperature.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/clock.h"
#include "gpu/gpu_support.h"
#include "profile/energy.h"
#include "profile/gpu_ceiling.h"
#include "support/cli_runner.h"

namespace crucible::e2e {
namespace {

TEST(GpuEnergy, CounterAgreesWithPowerTimesTimeUnderLoad) {
  REQUIRE_GPU();
  auto meter = profile::EnergyMeter::for_device(Device::cuda(0));
  ASSERT_TRUE(meter.is_ok()) << meter.status().message();
  EXPECT_EQ(meter->source().rfind("NVML cuda:0", 0), 0u) << meter->source();
  auto load_for = [](double seconds) {
    Stopwatch sw;
    while (sw.elapsed_ms() < seconds * 1e3)
      ASSERT_TRUE(profile::measure_gpu_ceiling(Device::cuda(0)).is_ok());
  };
  load_for(1.5);  // the board's power settles (NVML averages it over ~1 s)
  std::atomic<bool> stop{false};
  double power_sum = 0, limit = 0;
  int samples = 0;
  const double j0 = *meter->joules();
  Stopwatch window;
  std::thread sampler([&] {
    while (!stop) {
      const profile::NvmlSample s = *meter->gpu_sample();
      if (s.power_w > 0) power_sum += s.power_w, ++samples;
      limit = s.power_limit_w;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  load_for(4);
  stop = true;
  sampler.join();
  const double seconds = window.elapsed_ms() * 1e-3;
  const double joules = *meter->joules() - j0;
  ASSERT_GT(samples, 20);
  const double mean_w = power_sum / samples;
  std::printf("[gpu energy] %.0f J over %.2f s = %.0f W; sampled power %.0f W (limit %.0f W)\n",
              joules, seconds, joules / seconds, mean_w, limit);
  EXPECT_GT(joules, 0);
  EXPECT_NEAR(joules / seconds, mean_w, 0.10 * mean_w);
  if (limit > 0) {
    EXPECT_LE(mean_w, limit * 1.05);
  }
}

TEST(GpuEnergy, TrainingRowsCarryTheBoardsFigures) {
  REQUIRE_GPU();
  TempDir dir("gpu_energy_train");
  auto r = run_crucible({"train", "--run-dir", dir / "run", "--set", "run.device=cuda", "--set",
                         "train.steps=20", "--set", "run.sample_tokens=0"},
                        dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("[energy] measuring NVML cuda:0"), std::string::npos) << r.output;
  for (const auto& row : metric_rows(dir / "run/metrics.jsonl")) {
    ASSERT_TRUE(row.contains("energy_j")) << row.dump();
    EXPECT_GE(row["energy_j"].get<double>(), 0);
    EXPECT_GT(row.value("gpu_sm_clock_mhz", 0.0), 0);
    EXPECT_GT(row.value("gpu_temp_c", 0.0), 0);
  }
}

}  // namespace
}  // namespace crucible::e2e
