// Finite-difference checks of every layer's backward against its forward.
#include <gtest/gtest.h>

#include <cstring>

#include "nn/gpt.h"
#include "nn/layers.h"
#include "support/gradcheck.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

using testing::GradTarget;
using testing::grad_check;
using testing::random_vector;
using testing::weighted_sum;

// Registry holding the given parameter shapes, randomly initialised (so biases
// and LayerNorm weights are exercised away from 0 / 1).
struct Params {
  nn::ParamRegistry reg;
  std::vector<size_t> idx;
  Params(std::initializer_list<Shape> shapes, Rng& rng) {
    int k = 0;
    for (const Shape& s : shapes) idx.push_back(reg.add("p" + std::to_string(k++), s, false, nn::Init::zeros));
    reg.allocate();
    rng.fill_uniform(reg.values(), reg.numel(), -0.5f, 0.5f);
  }
  nn::Param operator[](int i) const { return reg.param(idx[i]); }
  std::vector<GradTarget> targets(const std::string& prefix) {
    std::vector<GradTarget> t;
    for (auto& s : reg.specs())
      t.push_back({prefix + s.name, reg.values() + s.offset, s.numel, reg.grads() + s.offset});
    return t;
  }
};

nn::Linear make_linear(nn::Param w, nn::Param b, int in, int out) {
  nn::Linear l;
  l.w = w;
  l.b = b;
  l.in = in;
  l.out = out;
  return l;
}

TEST(GradCheck, Linear) {
  Rng rng(testing::test_seed(), 1);
  const int N = 5, in = 7, out = 9;
  Params P({{in, out}, {out}}, rng);
  nn::Linear lin = make_linear(P[0], P[1], in, out);
  auto x = random_vector(rng, N * in), r = random_vector(rng, N * out);
  std::vector<float> y(N * out), dx(N * in);
  auto loss = [&] {
    lin.forward(y.data(), DType::f32, x.data(), N);
    return weighted_sum(y.data(), r);
  };
  loss();
  lin.backward(dx.data(), r.data(), N);
  auto t = P.targets("linear.");
  t.push_back({"x", x.data(), x.size(), dx.data()});
  grad_check(loss, t, rng);
}

TEST(GradCheck, LayerNormWithResidual) {
  Rng rng(testing::test_seed(), 2);
  const int N = 6, C = 19;
  Params P({{C}, {C}}, rng);
  nn::LayerNorm ln;
  ln.w = P[0];
  ln.b = P[1];
  ln.C = C;
  Arena arena("test.arena");
  auto a = random_vector(rng, N * C), b = random_vector(rng, N * C);
  auto r1 = random_vector(rng, N * C), r2 = random_vector(rng, N * C);
  std::vector<float> out(N * C), resid(N * C);
  auto loss = [&] {
    arena.reset();
    ln.forward(arena, out.data(), resid.data(), a.data(), b.data(), N);
    return weighted_sum(out.data(), r1) + weighted_sum(resid.data(), r2);
  };
  loss();
  std::vector<float> dx = r2;  // the residual output's own gradient
  ln.backward(dx.data(), r1.data(), N);
  auto t = P.targets("ln.");
  t.push_back({"a", a.data(), a.size(), dx.data()});
  t.push_back({"b", b.data(), b.size(), dx.data()});
  grad_check(loss, t, rng);
}

TEST(GradCheck, Embedding) {
  Rng rng(testing::test_seed(), 3);
  const int B = 2, T = 5, C = 6, V = 4;
  Params P({{V, C}, {T, C}}, rng);
  nn::Embedding e{P[0], P[1], V, C, {0, V}, nullptr, false, nullptr};
  Arena arena("test.embedding");
  std::vector<int32_t> tok(B * T);
  for (auto& t : tok) t = int32_t(rng.next_u32() % V);
  auto r = random_vector(rng, B * T * C);
  std::vector<float> out(B * T * C);
  auto loss = [&] {
    e.forward(arena, out.data(), tok.data(), B, T);
    return weighted_sum(out.data(), r);
  };
  loss();
  e.backward(arena, r.data(), B, T);
  grad_check(loss, P.targets("emb."), rng);
}

TEST(GradCheck, CausalSelfAttention) {
  Rng rng(testing::test_seed(), 4);
  const int B = 2, T = 7, C = 12, NH = 3;
  Params P({{C, 3 * C}, {3 * C}, {C, C}, {C}}, rng);
  nn::CausalSelfAttention at;
  at.c_attn = make_linear(P[0], P[1], C, 3 * C);
  at.c_proj = make_linear(P[2], P[3], C, C);
  at.C = C;
  at.NH = NH;
  Arena arena("test.arena");
  auto x = random_vector(rng, B * T * C), r = random_vector(rng, B * T * C);
  std::vector<float> out(B * T * C), dx(B * T * C);
  auto loss = [&] {
    arena.reset();
    at.forward(arena, out.data(), x.data(), B, T);
    return weighted_sum(out.data(), r);
  };
  loss();
  at.backward(arena, dx.data(), r.data(), B, T);
  auto t = P.targets("attn.");
  t.push_back({"x", x.data(), x.size(), dx.data()});
  grad_check(loss, t, rng);
}

TEST(GradCheck, MLP) {
  Rng rng(testing::test_seed(), 5);
  const int N = 5, C = 6;
  Params P({{C, 4 * C}, {4 * C}, {4 * C, C}, {C}}, rng);
  nn::MLP mlp;
  mlp.c_fc = make_linear(P[0], P[1], C, 4 * C);
  mlp.c_proj = make_linear(P[2], P[3], 4 * C, C);
  mlp.C = C;
  Arena arena("test.arena");
  auto x = random_vector(rng, N * C, -2, 2), r = random_vector(rng, N * C);
  std::vector<float> out(N * C), dx(N * C);
  auto loss = [&] {
    arena.reset();
    mlp.forward(arena, out.data(), x.data(), N);
    return weighted_sum(out.data(), r);
  };
  loss();
  mlp.backward(arena, dx.data(), r.data(), N);
  auto t = P.targets("mlp.");
  t.push_back({"x", x.data(), x.size(), dx.data()});
  grad_check(loss, t, rng);
}

TEST(GradCheck, Block) {
  Rng rng(testing::test_seed(), 6);
  const int B = 2, T = 5, C = 8, NH = 2;
  Params P({{C}, {C}, {C, 3 * C}, {3 * C}, {C, C}, {C}, {C}, {C}, {C, 4 * C}, {4 * C}, {4 * C, C}, {C}},
           rng);
  nn::Block bl;
  bl.C = C;
  bl.ln_1.w = P[0], bl.ln_1.b = P[1], bl.ln_1.C = C;
  bl.attn.c_attn = make_linear(P[2], P[3], C, 3 * C);
  bl.attn.c_proj = make_linear(P[4], P[5], C, C);
  bl.attn.C = C, bl.attn.NH = NH;
  bl.ln_2.w = P[6], bl.ln_2.b = P[7], bl.ln_2.C = C;
  bl.mlp.c_fc = make_linear(P[8], P[9], C, 4 * C);
  bl.mlp.c_proj = make_linear(P[10], P[11], 4 * C, C);
  bl.mlp.C = C;
  Arena arena("test.arena");
  auto ra = random_vector(rng, B * T * C), rb = random_vector(rng, B * T * C);
  auto w = random_vector(rng, B * T * C);
  auto loss = [&] {
    arena.reset();
    float *oa, *ob;
    bl.forward(arena, ra.data(), rb.data(), &oa, &ob, B, T);
    return weighted_sum(oa, w) + weighted_sum(ob, w);
  };
  loss();
  std::vector<float> dr = w;
  bl.backward(arena, dr.data(), B, T);
  auto t = P.targets("block.");
  t.push_back({"r_a", ra.data(), ra.size(), dr.data()});
  t.push_back({"r_b", rb.data(), rb.size(), dr.data()});
  grad_check(loss, t, rng);
}

TEST(GradCheck, TwoLayerGPT) {
  Rng rng(testing::test_seed(), 7);
  nn::GPTConfig cfg{2, 2, 8, 11, 6};
  nn::GPT gpt(cfg);
  auto& P = gpt.params();
  rng.fill_uniform(P.values(), P.numel(), -0.3f, 0.3f);
  const int B = 2, T = 6;
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (auto& t : tok) t = int32_t(rng.next_u32() % cfg.vocab_size);
  for (auto& t : tgt) t = int32_t(rng.next_u32() % cfg.vocab_size);
  Arena arena("test.arena");
  auto loss = [&] {
    arena.reset();
    gpt.forward(arena, tok.data(), tgt.data(), B, T);
    double sum = 0;  // summed in double: the float mean would add a rounding step
    for (int i = 0; i < B * T; ++i) sum += gpt.losses()[i];
    return sum;
  };
  arena.reset();
  P.zero_grad();
  gpt.forward(arena, tok.data(), tgt.data(), B, T, /*grad_scale=*/float(B * T));
  gpt.backward(arena);
  std::vector<GradTarget> t;
  for (auto& s : P.specs())
    t.push_back({s.name, P.values() + s.offset, s.numel, P.grads() + s.offset});
  // The whole model runs in f32: the loss carries ~1e-6 of rounding noise,
  // which a central difference divides by 2h. At h = 1e-2 that noise reached
  // 0.3% of the largest gradient in ~7% of seeds (the failures grew as h
  // shrank: noise, not truncation); h = 2e-2 halves it, and the tolerance
  // floor is 0.3% of the largest gradient. A wrong term in a gradient is far
  // above that.
  testing::GradCheckOptions opt;
  opt.random_samples = 3;
  opt.eps = 2e-2;
  opt.atol_frac = 3e-3;
  grad_check(loss, t, rng, opt);
}

}  // namespace
}  // namespace crucible
