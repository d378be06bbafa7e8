// The whole GPT on the GPU against the CPU on the same weights and batch
// (issue: "the whole GPT step on the GPU against the CPU"): a model built
// with GPTPart::device = cuda:0 holds its parameters there (a host copy for
// initialisation), runs forward and backward under the GPU's DeviceScope with
// an arena of GPU memory, and must give the CPU's loss and every parameter's
// gradient: fp32 within 1e-4 relative per gradient tensor, bf16 within 1e-2
// (both round at the same points; the sums differ in order), with and
// without the fused head.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/allocator.h"
#include "core/rng.h"
#include "gpu/gpu_support.h"
#include "kernels/device_scope.h"
#include "nn/gpt.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

TEST(GpuModel, ForwardAndBackwardMatchTheCpuOnTheSameWeights) {
  REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  nn::GPTConfig cfg;
  cfg.n_layer = 2, cfg.n_head = 4, cfg.n_embd = 128, cfg.vocab_size = 1000, cfg.seq_len = 64;
  const int B = 4, T = 64, N = B * T;
  Rng rng(testing::test_seed(), 0x6e7);
  std::vector<int32_t> tokens(static_cast<size_t>(N)), targets(static_cast<size_t>(N));
  for (int i = 0; i < N; ++i)
    tokens[size_t(i)] = int32_t(rng.next_u32() % 1000), targets[size_t(i)] = int32_t(rng.next_u32() % 1000);
  for (DType precision : {DType::f32, DType::bf16})
    for (bool fused : {false, true}) {
      SCOPED_TRACE(std::string(precision == DType::bf16 ? "bf16" : "fp32") + (fused ? ", fused head" : ""));
      nn::GPTPart part = nn::GPTPart::whole(cfg);
      part.precision = precision;
      part.head_chunk = fused ? 64 : 0;
      nn::GPT cpu(cfg, part);
      cpu.params().init(11);
      part.device = gpu;
      nn::GPT on_gpu(cfg, part);
      on_gpu.params().init(11);
      ASSERT_EQ(on_gpu.params().device(), gpu);
      const size_t P = cpu.params().numel();
      // The same weights: the GPU's, read back, are the CPU's bits.
      std::vector<float> w(P);
      ASSERT_TRUE(kernels::cuda::copy_to_host(w.data(), on_gpu.params().values(), P * 4, nullptr).is_ok());
      ASSERT_TRUE(kernels::cuda::synchronize(nullptr).is_ok());
      ASSERT_EQ(0, std::memcmp(w.data(), cpu.params().values(), P * 4));

      Arena cpu_arena("gpu_model_test cpu");
      const float cpu_loss = cpu.forward(cpu_arena, tokens.data(), targets.data(), B, T, 1.0f);
      cpu.backward(cpu_arena);
      Arena gpu_arena("gpu_model_test gpu", Allocator::of(gpu));
      float gpu_loss = 0;
      {
        kernels::DeviceScope scope(gpu);
        gpu_loss = on_gpu.forward(gpu_arena, tokens.data(), targets.data(), B, T, 1.0f);
        on_gpu.backward(gpu_arena);
      }
      ASSERT_TRUE(kernels::cuda::last_error("the GPU step").is_ok());
      const double tol = precision == DType::bf16 ? 1e-2 : 1e-4;
      EXPECT_NEAR(gpu_loss, cpu_loss, tol * std::fabs(cpu_loss));
      std::vector<float> g(P);
      ASSERT_TRUE(kernels::cuda::copy_to_host(g.data(), on_gpu.params().grads(), P * 4, nullptr).is_ok());
      ASSERT_TRUE(kernels::cuda::synchronize(nullptr).is_ok());
      for (const nn::ParamSpec& s : cpu.params().specs()) {
        double diff = 0, norm = 0;
        for (size_t i = 0; i < s.numel; ++i) {
          const double want = cpu.params().grads()[s.offset + i], got = g[s.offset + i];
          diff += (got - want) * (got - want), norm += want * want;
        }
        EXPECT_LE(std::sqrt(diff), tol * std::sqrt(norm) + 1e-12) << s.name;
      }
    }
}

}  // namespace
}  // namespace crucible
