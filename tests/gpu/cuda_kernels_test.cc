// The CUDA backend's LayerNorm, GELU, cross-entropy, embedding backward and
// AdamW with bf16 moments (kernels/cuda/*.cu), called through kernels:: under
// a GPU's DeviceScope, against the naive references on fresh random inputs,
// odd sizes included (non-multiple-of-warp rows, vocabularies not a multiple
// of the block). Bounds as the CPU kernels' tests (tests/kernels), with f32
// sums over a few hundred rows in another order; a bf16 output may differ by
// one bf16 ulp (2^-7 relative) on top. The embedding's backward adds in the
// CPU's order: exact.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/rng.h"
#include "gpu/gpu_support.h"
#include "kernels/device_scope.h"
#include "kernels/kernels.h"
#include "kernels/reference.h"
#include "support/attention_bounds.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

using gpu_test::DeviceBuffer;
namespace cuda = kernels::cuda;

std::vector<float> widen(const std::vector<bf16>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = to_f32(x[i]);
  return out;
}
std::vector<bf16> narrow(const std::vector<float>& x) {
  std::vector<bf16> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = to_bf16(x[i]);
  return out;
}

// Every got[i] within atol + rtol |want[i]| (+ one bf16 ulp of want when bf16).
void expect_close(const std::string& what, const std::vector<float>& got, const std::vector<float>& want, double atol,
                  double rtol, bool bf16 = false) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want[i], bound = atol + rtol * std::fabs(w) + (bf16 ? std::fabs(w) * 0x1p-7 : 0.0);
    ASSERT_NEAR(got[i], w, bound) << what << " [" << i << "]";
  }
}

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override { REQUIRE_GPU(); }
  Rng rng_{testing::test_seed(), 0xc0da};
  std::vector<float> random(size_t n, float lo = -1, float hi = 1) { return testing::random_vector(rng_, n, lo, hi); }
};

TEST_F(CudaKernels, LayerNormMatchesTheReference) {
  kernels::DeviceScope gpu(Device::cuda(0));
  for (auto [N, C] : {std::pair{1, 1}, std::pair{7, 33}, std::pair{64, 768}, std::pair{300, 1600}})
    for (bool fused : {false, true}) {
      SCOPED_TRACE("N C = " + std::to_string(N) + " " + std::to_string(C) + (fused ? " fused" : ""));
      const size_t n = size_t(N) * C;
      auto a = random(n), b = random(n), w = random(static_cast<size_t>(C)), bias = random(static_cast<size_t>(C));
      DeviceBuffer<float> da(a), db(b), dw_(w), dbias_(bias), out(n), resid(n), mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N));
      DeviceBuffer<bf16> out16(n);
      kernels::residual_layernorm_forward(fused ? resid.get() : nullptr, out.get(), mean.get(), rstd.get(), da.get(),
                                          fused ? db.get() : nullptr, dw_.get(), dbias_.get(), N, C);
      kernels::residual_layernorm_forward_bf16(nullptr, out16.get(), mean.get(), rstd.get(), da.get(),
                                               fused ? db.get() : nullptr, dw_.get(), dbias_.get(), N, C);
      std::vector<float> want(n), want_resid(n), want_mean(static_cast<size_t>(N)), want_rstd(static_cast<size_t>(N));
      kernels::ref::residual_layernorm_forward(fused ? want_resid.data() : nullptr, want.data(), want_mean.data(),
                                               want_rstd.data(), a.data(), fused ? b.data() : nullptr, w.data(),
                                               bias.data(), N, C);
      if (fused) {
        EXPECT_EQ(resid.host(), want_resid);  // a + b: exact
      }
      expect_close("out", out.host(), want, C == 1 ? 5e-4 : 1e-5, 1e-4);
      expect_close("out bf16", widen(out16.host()), want, C == 1 ? 5e-4 : 1e-5, 1e-4, true);
      expect_close("mean", mean.host(), want_mean, 1e-6, 1e-5);
      expect_close("rstd", rstd.host(), want_rstd, 1e-5, 1e-4);
      // Backward: dx, dw and dbias accumulate into what is there.
      auto dout = random(n), dx0 = random(n), dw0 = random(static_cast<size_t>(C)), db0 = random(static_cast<size_t>(C));
      const std::vector<float> x = fused ? want_resid : a;
      DeviceBuffer<float> ddout(dout), dx(dx0), dw(dw0), ddb(db0), dx_in(x), dmean(want_mean), drstd(want_rstd);
      kernels::layernorm_backward(dx.get(), dw.get(), ddb.get(), ddout.get(), dx_in.get(), dw_.get(), dmean.get(),
                                  drstd.get(), N, C);
      std::vector<float> want_dx = dx0, want_dw = dw0, want_db = db0;
      kernels::ref::layernorm_backward(want_dx.data(), want_dw.data(), want_db.data(), dout.data(), x.data(), w.data(),
                                       want_mean.data(), want_rstd.data(), N, C);
      expect_close("dx", dx.host(), want_dx, 2e-5, 2e-4);
      expect_close("dw", dw.host(), want_dw, 1e-4, 1e-4);
      expect_close("dbias", ddb.host(), want_db, 1e-4, 1e-4);
    }
}

TEST_F(CudaKernels, GeluMatchesTheReference) {
  kernels::DeviceScope gpu(Device::cuda(0));
  for (auto [N, C] : {std::pair{1, 1}, std::pair{7, 33}, std::pair{300, 3072}}) {
    SCOPED_TRACE("N C = " + std::to_string(N) + " " + std::to_string(C));
    const size_t n = size_t(N) * C;
    auto pre = random(n, -4, 4), bias = random(static_cast<size_t>(C));
    DeviceBuffer<float> dpre_in(pre), dbias_in(bias), out(n);
    kernels::bias_gelu_forward(out.get(), dpre_in.get(), dbias_in.get(), N, C);
    std::vector<float> want_pre = pre, want_out(n);
    kernels::ref::bias_gelu_forward(want_out.data(), want_pre.data(), bias.data(), N, C);
    EXPECT_EQ(dpre_in.host(), want_pre);  // pre + bias: exact
    expect_close("out", out.host(), want_out, 1e-5, 1e-4);
    // bf16: pre + bias rounded, gelu of the rounded value.
    const std::vector<bf16> pre16 = narrow(pre);
    DeviceBuffer<bf16> dpre16(pre16), out16(n);
    kernels::bias_gelu_forward_bf16(out16.get(), dpre16.get(), dbias_in.get(), N, C);
    std::vector<bf16> want_pre16 = pre16, want_out16(n);
    kernels::ref::bias_gelu_forward_bf16(want_out16.data(), want_pre16.data(), bias.data(), N, C);
    EXPECT_EQ(widen(dpre16.host()), widen(want_pre16));
    expect_close("out bf16", widen(out16.host()), widen(want_out16), 1e-5, 1e-4, true);
    // Backward, and in place (dpre aliasing dout).
    auto dout = random(n), db0 = random(static_cast<size_t>(C));
    DeviceBuffer<float> ddout(dout), dpre(n), dbias(db0), inplace(dout), dbias2(db0), p(want_pre);
    kernels::bias_gelu_backward(dpre.get(), dbias.get(), ddout.get(), p.get(), N, C);
    kernels::bias_gelu_backward(inplace.get(), dbias2.get(), inplace.get(), p.get(), N, C);
    std::vector<float> want_dpre(n), want_db = db0;
    kernels::ref::bias_gelu_backward(want_dpre.data(), want_db.data(), dout.data(), want_pre.data(), N, C);
    const std::vector<float> got_dpre = dpre.host();
    expect_close("dpre", got_dpre, want_dpre, 1e-5, 1e-4);
    expect_close("dbias", dbias.host(), want_db, 1e-4, 1e-4);
    EXPECT_EQ(inplace.host(), got_dpre);
    EXPECT_EQ(dbias2.host(), dbias.host());
    DeviceBuffer<bf16> dpre16_out(n), p16(want_pre16);
    DeviceBuffer<float> dbias16(db0);
    kernels::bias_gelu_backward_bf16(dpre16_out.get(), dbias16.get(), ddout.get(), p16.get(), N, C);
    std::vector<bf16> want_dpre16(n);
    std::vector<float> want_db16 = db0;
    kernels::ref::bias_gelu_backward_bf16(want_dpre16.data(), want_db16.data(), dout.data(), want_pre16.data(), N, C);
    expect_close("dpre bf16", widen(dpre16_out.host()), widen(want_dpre16), 1e-5, 1e-4, true);
    expect_close("dbias bf16", dbias16.host(), want_db16, 1e-4, 1e-4);
  }
}

TEST_F(CudaKernels, CrossEntropyMatchesTheReference) {
  kernels::DeviceScope gpu(Device::cuda(0));
  for (auto [N, V] : {std::pair{1, 1}, std::pair{5, 7}, std::pair{33, 1000}, std::pair{64, 50257}}) {
    SCOPED_TRACE("N V = " + std::to_string(N) + " " + std::to_string(V));
    const size_t n = size_t(N) * V;
    std::vector<int32_t> targets(static_cast<size_t>(N));
    for (auto& t : targets) t = int32_t(rng_.next_u32() % uint32_t(V));
    if (N > 2) targets[1] = -1;  // an ignored row
    const float dscale = 1.0f / float(N);
    auto logits = random(n, -6, 6);
    const std::vector<bf16> logits16 = narrow(logits);
    DeviceBuffer<int32_t> dt(targets);
    for (float scale : {0.0f, dscale}) {
      SCOPED_TRACE(scale == 0 ? "loss only" : "with gradient");
      DeviceBuffer<float> x(logits), losses(static_cast<size_t>(N)), losses16(static_cast<size_t>(N));
      DeviceBuffer<bf16> x16(logits16);
      kernels::softmax_cross_entropy(losses.get(), x.get(), dt.get(), N, V, scale);
      kernels::softmax_cross_entropy_bf16(losses16.get(), x16.get(), dt.get(), N, V, scale);
      std::vector<float> want_x = logits, want_losses(static_cast<size_t>(N)), want_losses16(static_cast<size_t>(N));
      std::vector<bf16> want_x16 = logits16;
      kernels::ref::softmax_cross_entropy(want_losses.data(), want_x.data(), targets.data(), N, V, scale);
      kernels::ref::softmax_cross_entropy_bf16(want_losses16.data(), want_x16.data(), targets.data(), N, V, scale);
      expect_close("losses", losses.host(), want_losses, 1e-5, 1e-5);
      expect_close("losses bf16", losses16.host(), want_losses16, 1e-5, 1e-5);
      expect_close("dlogits", x.host(), want_x, 1e-7 / N, 1e-4);
      expect_close("dlogits bf16", widen(x16.host()), widen(want_x16), 1e-7 / N, 1e-4, true);
    }
    // The vocabulary-parallel halves: this rank's columns [offset, offset + Vl).
    const int offset = V / 3, Vl = V - offset;
    std::vector<float> cols(size_t(N) * Vl);
    for (int r = 0; r < N; ++r)
      for (int v = 0; v < Vl; ++v) cols[size_t(r) * Vl + v] = logits[size_t(r) * V + offset + v];
    const std::vector<bf16> cols16 = narrow(cols);
    DeviceBuffer<float> dcols(cols), mx(static_cast<size_t>(N)), ls(static_cast<size_t>(N));
    DeviceBuffer<bf16> dcols16(cols16);
    kernels::logsumexp_rows(mx.get(), ls.get(), dcols.get(), N, Vl);
    std::vector<float> want_mx(static_cast<size_t>(N)), want_ls(static_cast<size_t>(N));
    kernels::ref::logsumexp_rows(want_mx.data(), want_ls.data(), cols.data(), N, Vl);
    EXPECT_EQ(mx.host(), want_mx);
    expect_close("log_sum", ls.host(), want_ls, 1e-5, 1e-5);
    DeviceBuffer<float> mx16(static_cast<size_t>(N)), ls16(static_cast<size_t>(N));
    kernels::logsumexp_rows_bf16(mx16.get(), ls16.get(), dcols16.get(), N, Vl);
    std::vector<float> want_mx16(static_cast<size_t>(N)), want_ls16(static_cast<size_t>(N));
    kernels::ref::logsumexp_rows_bf16(want_mx16.data(), want_ls16.data(), cols16.data(), N, Vl);
    EXPECT_EQ(mx16.host(), want_mx16);
    expect_close("log_sum bf16", ls16.host(), want_ls16, 1e-5, 1e-5);
    DeviceBuffer<float> dmx(want_mx), dls(want_ls);
    kernels::softmax_xent_backward(dcols.get(), dmx.get(), dls.get(), dt.get(), offset, N, Vl, dscale);
    kernels::softmax_xent_backward_bf16(dcols16.get(), dmx.get(), dls.get(), dt.get(), offset, N, Vl, dscale);
    std::vector<float> want_cols = cols;
    std::vector<bf16> want_cols16 = cols16;
    kernels::ref::softmax_xent_backward(want_cols.data(), want_mx.data(), want_ls.data(), targets.data(), offset, N, Vl,
                                        dscale);
    kernels::ref::softmax_xent_backward_bf16(want_cols16.data(), want_mx.data(), want_ls.data(), targets.data(),
                                             offset, N, Vl, dscale);
    expect_close("dcols", dcols.host(), want_cols, 1e-7 / N, 1e-4);
    expect_close("dcols bf16", widen(dcols16.host()), widen(want_cols16), 1e-7 / N, 1e-4, true);
  }
}

// The CPU's order of additions per float: the same bits, for the whole
// vocabulary, a shard of it, and positions only (dwte null).
TEST_F(CudaKernels, EmbeddingBackwardIsTheCpusBits) {
  kernels::DeviceScope gpu(Device::cuda(0));
  struct Shape {
    int B, T, C, V, lo, hi;
  };
  for (const Shape& s : {Shape{1, 1, 1, 1, 0, 1}, Shape{3, 33, 100, 257, 0, 257}, Shape{8, 64, 768, 50, 10, 31},
                         Shape{4, 1024, 768, 50257, 25000, 50257}}) {
    SCOPED_TRACE("B T C V = " + std::to_string(s.B) + " " + std::to_string(s.T) + " " + std::to_string(s.C) + " " +
                 std::to_string(s.V));
    const int N = s.B * s.T, Vl = s.hi - s.lo;
    std::vector<int32_t> idx(static_cast<size_t>(N));
    for (auto& t : idx) t = int32_t(rng_.next_u32() % uint32_t(s.V));
    auto dout = random(size_t(N) * s.C), dwte0 = random(size_t(Vl) * s.C), dwpe0 = random(size_t(s.T) * s.C);
    DeviceBuffer<int32_t> didx(idx);
    DeviceBuffer<float> ddout(dout), dwte(dwte0), dwpe(dwpe0), dwpe_only(dwpe0), dwte_only(dwte0);
    kernels::embedding_backward(dwte.get(), dwpe.get(), ddout.get(), didx.get(), s.lo, s.hi, s.B, s.T, s.C);
    kernels::embedding_backward(nullptr, dwpe_only.get(), ddout.get(), didx.get(), s.lo, s.hi, s.B, s.T, s.C);
    // dwpe null: the data-parallel embedding rows' sum (parallel/embedding_rows.h).
    kernels::embedding_backward(dwte_only.get(), nullptr, ddout.get(), didx.get(), s.lo, s.hi, s.B, s.T, s.C);
    std::vector<float> want_wte = dwte0, want_wpe = dwpe0;
    kernels::ref::embedding_backward(want_wte.data(), want_wpe.data(), dout.data(), idx.data(), s.lo, s.hi, s.B, s.T,
                                     s.C);
    EXPECT_EQ(dwte.host(), want_wte);
    EXPECT_EQ(dwpe.host(), want_wpe);
    EXPECT_EQ(dwpe_only.host(), want_wpe);
    EXPECT_EQ(dwte_only.host(), want_wte);
  }
}

// x within atol + (rtol + one bf16 ulp) |want| + bound of each element.
void expect_within(const std::string& what, const std::vector<float>& got, const std::vector<float>& want,
                   const std::vector<double>& bound, double atol, double rtol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want[i], b = atol + (rtol + 0x1p-7) * std::fabs(w) + bound[i];
    ASSERT_NEAR(got[i], w, b) << what << " [" << i << "] (bf16 products' bound " << bound[i] << ")";
  }
}

// The tensor-core bf16 attention (attention_tc.cu) rounds P, dO and dS to
// bf16 as the CPU's pairs form does: checked as tests/kernels checks that
// form, against the references plus the worst case of those roundings
// (support/attention_bounds.h), dQ and dK against the oracle that reads the
// kernel's own stored out. Run through the table, as the step runs it.
void check_attention_tc(const std::vector<bf16>& qkv16, const std::vector<float>& dout, int B, int T, int C, int NH,
                        double atol, double rtol) {
  SCOPED_TRACE("tensor cores");
  const size_t n = size_t(B) * T * C, nl = size_t(B) * NH * T;
  const std::vector<float> qkv = widen(qkv16);
  std::vector<float> want_out(n), want_lse(nl);
  kernels::ref::attention_forward(want_out.data(), want_lse.data(), qkv.data(), B, T, C, NH);
  DeviceBuffer<bf16> dq(qkv16), out(n), dqkv(3 * n);
  DeviceBuffer<float> ddout(dout), lse(nl);
  kernels::attention_forward_bf16(out.get(), lse.get(), dq.get(), B, T, C, NH);
  kernels::attention_backward_bf16(dqkv.get(), ddout.get(), dq.get(), out.get(), lse.get(), B, T, C, NH);
  const std::vector<float> stored = widen(out.host());
  const testing::DotBounds bd = testing::dot_bounds(qkv, dout, stored, B, T, C, NH);
  const std::vector<float> reading = testing::attention_backward_reading_out(dout, qkv, stored, B, T, C, NH);
  expect_within("out", stored, want_out, bd.out, atol, rtol);
  expect_close("lse", lse.host(), want_lse, atol, rtol);
  const std::vector<float> got = widen(dqkv.host());
  for (size_t row = 0; row < size_t(B) * T; ++row)
    for (int part = 0; part < 3; ++part) {
      const size_t o = row * 3 * C + size_t(part) * C;
      const std::vector<float> g(got.begin() + o, got.begin() + o + C), w(reading.begin() + o, reading.begin() + o + C);
      const std::vector<double> b(bd.dqkv.begin() + o, bd.dqkv.begin() + o + C);
      expect_within(part == 0 ? "dq" : part == 1 ? "dk" : "dv", g, w, b, atol, rtol);
    }
}

// Attention against the double reference, the CPU attention test's shapes
// and bounds (and GPT-2's heads), with scores up to ~500 in magnitude too.
// bf16: out within a bf16 ulp; dV likewise; dQ and dK are formed from D =
// dO . out with the stored (rounded) out, as they must be, while the
// reference forms D exactly: 3e-3 absolute covers that (bf16_ref.cc).
TEST_F(CudaKernels, AttentionMatchesTheReference) {
  kernels::DeviceScope gpu(Device::cuda(0));
  struct Shape {
    int B, T, C, NH;
    float mag;
  };
  for (const Shape& sh : {Shape{1, 1, 8, 1, 1}, Shape{2, 7, 24, 2, 1}, Shape{1, 33, 64, 1, 1}, Shape{2, 100, 96, 8, 1},
                          Shape{1, 130, 192, 3, 1}, Shape{3, 64, 256, 4, 1}, Shape{1, 65, 256, 2, 1},
                          Shape{2, 256, 768, 12, 1}, Shape{2, 70, 192, 3, 8}}) {
    SCOPED_TRACE("B T C NH = " + std::to_string(sh.B) + " " + std::to_string(sh.T) + " " + std::to_string(sh.C) + " " +
                 std::to_string(sh.NH) + " mag " + std::to_string(sh.mag));
    const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH;
    const size_t n = size_t(B) * T * C, nl = size_t(B) * NH * T;
    const double atol = sh.mag > 1 ? 1e-4 : 2e-5, rtol = sh.mag > 1 ? 1e-3 : 2e-4;
    auto qkv = random(3 * n, -sh.mag, sh.mag), dout = random(n);
    std::vector<float> want_out(n), want_lse(nl), want_dqkv(3 * n);
    kernels::ref::attention_forward(want_out.data(), want_lse.data(), qkv.data(), B, T, C, NH);
    kernels::ref::attention_backward(want_dqkv.data(), dout.data(), qkv.data(), want_out.data(), want_lse.data(), B, T,
                                     C, NH);
    DeviceBuffer<float> dq(qkv), ddout(dout), out(n), lse(nl), dqkv(random(3 * n, 5, 9));  // "=": garbage first
    kernels::attention_forward(out.get(), lse.get(), dq.get(), B, T, C, NH);
    kernels::attention_backward(dqkv.get(), ddout.get(), dq.get(), out.get(), lse.get(), B, T, C, NH);
    expect_close("out", out.host(), want_out, atol, rtol);
    expect_close("lse", lse.host(), want_lse, atol, rtol);
    expect_close("dqkv", dqkv.host(), want_dqkv, atol, rtol);
    // bf16 against the bf16 reference (widened inputs, one rounding of each
    // output): the CUDA-core kernels, called directly (the table runs the
    // tensor-core ones where the head size allows, checked below).
    const std::vector<bf16> qkv16 = narrow(qkv);
    std::vector<bf16> want_out16(n), want_dqkv16(3 * n);
    std::vector<float> want_lse16(nl);
    kernels::ref::attention_forward_bf16(want_out16.data(), want_lse16.data(), qkv16.data(), B, T, C, NH);
    kernels::ref::attention_backward_bf16(want_dqkv16.data(), dout.data(), qkv16.data(), want_out16.data(),
                                          want_lse16.data(), B, T, C, NH);
    DeviceBuffer<bf16> dq16(qkv16), out16(n), dqkv16(3 * n);
    DeviceBuffer<float> lse16(nl);
    cuda::attention_forward_bf16(out16.get(), lse16.get(), dq16.get(), B, T, C, NH, nullptr);
    cuda::attention_backward_bf16(dqkv16.get(), ddout.get(), dq16.get(), out16.get(), lse16.get(), B, T, C, NH,
                                  nullptr);
    expect_close("out bf16", widen(out16.host()), widen(want_out16), atol, rtol, true);
    expect_close("lse bf16", lse16.host(), want_lse16, atol, rtol);
    const std::vector<float> got = widen(dqkv16.host()), want = widen(want_dqkv16);
    for (size_t row = 0; row < size_t(B) * T; ++row)
      for (int part = 0; part < 3; ++part) {
        const size_t o = row * 3 * C + size_t(part) * C;
        const std::vector<float> g(got.begin() + o, got.begin() + o + C), w(want.begin() + o, want.begin() + o + C);
        expect_close(part == 2 ? "dv bf16" : "dq/dk bf16", g, w, part == 2 ? atol : 3e-3 * sh.mag, rtol, true);
      }
    if (cuda::attention_tc_supports(C, NH)) check_attention_tc(qkv16, dout, B, T, C, NH, atol, rtol);
  }
}

TEST_F(CudaKernels, AdamWWithBf16MomentsMatchesTheReference) {
  kernels::DeviceScope gpu(Device::cuda(0));
  for (size_t n : {size_t(1), size_t(257), size_t(100003)}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    auto p = random(n), g = random(n);
    std::vector<bf16> m = narrow(random(n, -0.1f, 0.1f)), v = narrow(random(n, 0.0f, 0.01f));
    DeviceBuffer<float> dp(p), dg(g);
    DeviceBuffer<bf16> dm(m), dv(v), dh(n);
    std::vector<bf16> want_h(n);
    for (int t = 1; t <= 3; ++t) {
      const kernels::StepScalars sc = testing::adamw_step(0.01f, 0.7f, t, 0.9f, 0.95f);
      DeviceBuffer<kernels::StepScalars> dsc(std::vector<kernels::StepScalars>{sc});
      kernels::adamw_bf16_moments(dp.get(), dh.get(), dg.get(), dm.get(), dv.get(), n, dsc.get(), 0.9f, 0.95f, 1e-8f,
                                  0.1f);
      kernels::ref::adamw_bf16_moments(p.data(), want_h.data(), g.data(), m.data(), v.data(), n, &sc, 0.9f, 0.95f,
                                       1e-8f, 0.1f);
    }
    // p differs by f32 ulps of each step (and the moments' roundings may
    // land on either side once): within a bf16 ulp of the moments' effect.
    expect_close("p", dp.host(), p, 1e-5, 1e-4);
    expect_close("m", widen(dm.host()), widen(m), 1e-7, 1e-5, true);
    expect_close("v", widen(dv.host()), widen(v), 1e-9, 1e-5, true);
    expect_close("p bf16", widen(dh.host()), widen(want_h), 1e-6, 1e-5, true);
  }
}

}  // namespace
}  // namespace crucible
