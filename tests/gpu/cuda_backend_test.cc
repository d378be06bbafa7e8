// The CUDA backend against the CPU (kernels/cuda/cuda.h): run on the lent GPU
// machine by scripts/gpu_check.sh; every test reports itself skipped, with
// the reason, where there is no GPU (ctest label `gpu`), never passed.
// Host-side behaviour without a GPU is checked in CI by the first test.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/allocator.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "kernels/cuda/cuda.h"
#include "kernels/reference.h"
#include "gpu/gpu_support.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

namespace cuda = kernels::cuda;

// What a machine without a GPU says (CI): one line naming the problem, and no
// device memory source is registered.
TEST(CudaBackend, WithoutAGpuEveryEntryRefusesWithOneLine) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "this machine has a GPU: the refusals are not reachable";
  for (int index : {0, 3}) {
    Status s = cuda::use_device(index);
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.message().rfind("[cuda] ", 0), 0u) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
    EXPECT_FALSE(cuda::device_info(index).is_ok());
  }
  EXPECT_EQ(find_memory_source(MemoryKind::kDevice, Device::cuda(0)), nullptr);
}

TEST(CudaBackend, ADeviceIndexPastTheLastGpuIsNamed) {
  REQUIRE_GPU();
  const int n = cuda::device_count();
  Status s = cuda::use_device(n);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("no GPU cuda:" + std::to_string(n)), std::string::npos) << s.message();
}

// Device memory through the allocator: pools, peak and leak accounting as on
// the host; a block comes back zeroed and round-trips through pinned memory.
TEST(CudaBackend, DeviceMemoryIsPooledAndAccounted) {
  REQUIRE_GPU();
  ASSERT_TRUE(cuda::use_device(0).is_ok());
  MemorySource* src = find_memory_source(MemoryKind::kDevice, Device::cuda(0));
  MemorySource* pinned = find_memory_source(MemoryKind::kPinnedHost, Device::cpu());
  ASSERT_NE(src, nullptr);
  ASSERT_NE(pinned, nullptr);
  Allocator& dev = Allocator::on(*src);
  Allocator& host = Allocator::on(*pinned);
  const size_t n = (3 << 20) / 4 + 17;
  float* d = static_cast<float*>(dev.allocate(n * 4, "gpu test buffer"));
  float* h = static_cast<float*>(host.allocate(n * 4, "gpu test staging"));
  EXPECT_GE(dev.stats().in_use, n * 4);
  ASSERT_TRUE(cuda::copy_to_host(h, d, n * 4, nullptr).is_ok());
  ASSERT_TRUE(cuda::synchronize(nullptr).is_ok());
  for (size_t i = 0; i < n; i += 997) ASSERT_EQ(h[i], 0.0f) << i;  // zeroed when mapped
  for (size_t i = 0; i < n; ++i) h[i] = float(i % 1000) * 0.5f;
  ASSERT_TRUE(cuda::copy_to_device(d, h, n * 4, nullptr).is_ok());
  std::vector<float> back(n);
  ASSERT_TRUE(cuda::copy_to_host(back.data(), d, n * 4, nullptr).is_ok());
  ASSERT_TRUE(cuda::synchronize(nullptr).is_ok());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], h[i]) << i;
  dev.release(d);
  EXPECT_EQ(dev.allocate(n * 4, "gpu test buffer"), static_cast<void*>(d));  // from the pool
  dev.release(d);
  host.release(h);
  EXPECT_TRUE(dev.live_by_tag().empty());
}

// AdamW on the GPU against the double reference on fresh random inputs, odd
// sizes included, three steps (the bias corrections change), with weight
// decay, a clip factor and the bf16 copy.
TEST(CudaBackend, AdamWMatchesTheReference) {
  REQUIRE_GPU();
  ASSERT_TRUE(cuda::use_device(0).is_ok());
  Allocator& dev = Allocator::on(*find_memory_source(MemoryKind::kDevice, Device::cuda(0)));
  Rng rng(testing::test_seed(), 0xada);
  for (size_t n : {size_t(1), size_t(7), size_t(257), size_t(100003), size_t(1) << 22}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<float> p(n), m(n), v(n), g(n);
    rng.fill_uniform(p.data(), n, -1, 1);
    rng.fill_uniform(m.data(), n, -0.1f, 0.1f);
    rng.fill_uniform(v.data(), n, 0.0f, 0.01f);
    auto* dp = static_cast<float*>(dev.allocate(n * 4, "adamw p"));
    auto* dm = static_cast<float*>(dev.allocate(n * 4, "adamw m"));
    auto* dv = static_cast<float*>(dev.allocate(n * 4, "adamw v"));
    auto* dg = static_cast<float*>(dev.allocate(n * 4, "adamw g"));
    auto* dh = static_cast<bf16*>(dev.allocate(n * 2, "adamw p bf16"));
    auto* ds = static_cast<kernels::StepScalars*>(dev.allocate(sizeof(kernels::StepScalars), "adamw scalars"));
    ASSERT_TRUE(cuda::copy_to_device(dp, p.data(), n * 4, nullptr).is_ok());
    ASSERT_TRUE(cuda::copy_to_device(dm, m.data(), n * 4, nullptr).is_ok());
    ASSERT_TRUE(cuda::copy_to_device(dv, v.data(), n * 4, nullptr).is_ok());
    std::vector<bf16> want_bf16(n);
    for (int t = 1; t <= 3; ++t) {
      rng.fill_uniform(g.data(), n, -1, 1);
      ASSERT_TRUE(cuda::copy_to_device(dg, g.data(), n * 4, nullptr).is_ok());
      // The step's scalars as the trainer has them: the host's lr and t in,
      // the clip factor and bias corrections formed on the GPU from the norm.
      kernels::StepScalars sc;
      sc.lr = 0.01f;
      sc.t = t;
      sc.grad_sq = 4.0 / (0.7 * 0.7);  // a norm the bound 2 clips by ~0.7
      ASSERT_TRUE(cuda::copy_to_device(ds, &sc, sizeof sc, nullptr).is_ok());
      cuda::adamw_scalars(ds, 2.0f, 0.9f, 0.95f, nullptr);
      cuda::adamw(dp, dh, dg, dm, dv, n, ds, 0.9f, 0.95f, 1e-8f, 0.1f, nullptr);
      ASSERT_TRUE(cuda::last_error("adamw").is_ok());
      kernels::ref::adamw_scalars(&sc, 2.0f, 0.9f, 0.95f);
      kernels::StepScalars got;
      ASSERT_TRUE(cuda::copy_to_host(&got, ds, sizeof got, nullptr).is_ok());
      ASSERT_TRUE(cuda::synchronize(nullptr).is_ok());
      EXPECT_EQ(got.clip, sc.clip) << "one double division, as the CPU's";
      EXPECT_NEAR(got.bc1, sc.bc1, 1e-15);
      EXPECT_NEAR(got.bc2, sc.bc2, 1e-15);
      kernels::ref::adamw(p.data(), want_bf16.data(), g.data(), m.data(), v.data(), n, &sc, 0.9f, 0.95f, 1e-8f,
                          0.1f);
    }
    std::vector<float> gp(n), gm(n), gv(n);
    std::vector<bf16> gh(n);
    ASSERT_TRUE(cuda::copy_to_host(gp.data(), dp, n * 4, nullptr).is_ok());
    ASSERT_TRUE(cuda::copy_to_host(gm.data(), dm, n * 4, nullptr).is_ok());
    ASSERT_TRUE(cuda::copy_to_host(gv.data(), dv, n * 4, nullptr).is_ok());
    ASSERT_TRUE(cuda::copy_to_host(gh.data(), dh, n * 2, nullptr).is_ok());
    ASSERT_TRUE(cuda::synchronize(nullptr).is_ok());
    // The CPU kernels' tolerances (tests/kernels/adamw_test.cc): a few f32
    // ulps of each term, far below a wrong term; the bf16 copy within one
    // bf16 ulp of the reference's rounding (p itself differs by f32 ulps).
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(gp[i], p[i], 1e-6 + 1e-5 * std::fabs(p[i])) << i;
      ASSERT_NEAR(gm[i], m[i], 1e-7 + 1e-5 * std::fabs(m[i])) << i;
      ASSERT_NEAR(gv[i], v[i], 1e-9 + 1e-5 * std::fabs(v[i])) << i;
      ASSERT_NEAR(to_f32(gh[i]), to_f32(want_bf16[i]), std::fabs(p[i]) * 0x1p-7 + 1e-30) << i;
    }
    for (void* b : {static_cast<void*>(dp), static_cast<void*>(dm), static_cast<void*>(dv), static_cast<void*>(dg),
                    static_cast<void*>(dh), static_cast<void*>(ds)})
      dev.release(b);
  }
}

// A tensor on the GPU: from its pool, on its device, zeroed by zeros() even
// on a block reused dirty.
TEST(CudaBackend, TensorsLiveOnTheGpu) {
  REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  const size_t n = 1000;
  {
    Tensor dirty = Tensor::empty({int64_t(n)}, DType::f32, "gpu tensor", gpu);
    EXPECT_EQ(dirty.device(), gpu);
    std::vector<float> ones(n, 1.0f);
    ASSERT_TRUE(cuda::copy_to_device(dirty.data(), ones.data(), n * 4, nullptr).is_ok());
    ASSERT_TRUE(cuda::synchronize(nullptr).is_ok());
  }
  Tensor z = Tensor::zeros({int64_t(n)}, DType::f32, "gpu tensor", gpu);
  EXPECT_EQ(z.device(), gpu);
  std::vector<float> back(n, 5.0f);
  ASSERT_TRUE(cuda::copy_to_host(back.data(), z.data(), n * 4, nullptr).is_ok());
  ASSERT_TRUE(cuda::synchronize(nullptr).is_ok());
  EXPECT_EQ(back, std::vector<float>(n, 0.0f));
  Arena arena("gpu arena", Allocator::of(gpu));
  EXPECT_EQ(Tensor::arena(arena, {16}, DType::bf16).device(), gpu);
}

}  // namespace
}  // namespace crucible
