// Parity with PyTorch: the same small GPT-2, built by crucible and by
// tests/parity/gpt2_torch.py (plain PyTorch) from the same weights, exchanged
// as a safetensors file with Hugging Face GPT-2 names and layouts. Compares
// logits, loss, every parameter gradient, the clipped gradient norms and the
// parameters after 3 AdamW steps. Logits, loss, gradients and norms: relative
// error <= 1e-4 in fp32, where the relative error of a tensor is
// max|crucible - torch| / max|torch|. Parameters after the steps: the L2 error
// relative to the L2 size of the update they received, <= 5e-4 (see below).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ckpt/model_io.h"
#include "ckpt/safetensors.h"
#include "core/rng.h"
#include "nn/gpt.h"
#include "optim/adamw.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;

// ||got - want|| / ||want - before||: the error of an optimizer update
// relative to the update. Adam divides by sqrt(v), so an element whose first
// moment nearly cancels across steps (m ~ 0 while v is not) turns fp32
// rounding of the gradient into an update difference of up to ~0.5% of lr for
// that one element (measured: 4.6e-6 at lr 1e-3); a max-norm test then fails
// on noise. Over a tensor the L2 error is ~1e-5 of the update, while a real
// optimizer bug is not small: omitting weight decay (wd 0.1) alone is ~2e-3.
// Measured over 10 fresh seeds: at most 6e-5.
double update_error(const float* got, const float* want, const float* before, size_t n) {
  double diff = 0, update = 0;
  for (size_t i = 0; i < n; ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    update += (double(want[i]) - before[i]) * (double(want[i]) - before[i]);
  }
  return update > 0 ? std::sqrt(diff / update) : std::sqrt(diff);
}

double rel_error(const float* got, const float* want, size_t n) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// The PyTorch side of one parity case: the model's weights (perturbed so
// biases and LayerNorms are not 0/1 and their gradients generic) and random
// tokens go to tests/parity/gpt2_torch.py as files; its REF comes back.
// autocast: "" (fp32) or "bf16" (forward and loss under CPU bf16 autocast).
struct TorchCase {
  nn::GPTConfig cfg{2, 4, 64, 101, 37};  // odd sizes: vocab and T not multiples of any vector width
  int B = 3, T = 37;
  optim::AdamWConfig ocfg;
  std::vector<float> lrs;
  std::vector<int32_t> in, tgt;
  ckpt::SafetensorsFile ref;

  TorchCase() {
    ocfg.lr = 1e-3f;
    ocfg.weight_decay = 0.1f;
    ocfg.grad_clip = 0.5f;  // low enough that clipping engages
    for (int s = 0; s < 3; ++s) lrs.push_back(optim::lr_schedule(s, ocfg.lr, 2, 10));
  }

  // Initialises `gpt`'s weights and runs PyTorch from them.
  void run(nn::GPT& gpt, const std::string& autocast) {
    nn::ParamRegistry& P = gpt.params();
    gpt.init_weights(testing::test_seed());
    Rng rng(testing::test_seed(), 99);
    for (const auto& s : P.specs())
      if (s.init != nn::Init::normal)
        for (size_t i = 0; i < s.numel; ++i) P.values()[s.offset + i] += 0.1f * rng.normal();
    P.refresh_bf16();
    fs::path dir = fs::path(CRUCIBLE_BINARY_DIR) / "parity" / (std::to_string(::getpid()) + autocast);
    fs::create_directories(dir);
    ASSERT_TRUE(ckpt::save_params(P, (dir / "weights.safetensors").string()).is_ok());
    std::vector<int32_t> tokens(size_t(B) * (T + 1));
    for (auto& t : tokens) t = int32_t(rng.next_u32() % uint32_t(cfg.vocab_size));
    std::ofstream(dir / "tokens.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 4));
    nlohmann::json jc = {{"n_layer", cfg.n_layer},     {"n_head", cfg.n_head},
                         {"n_embd", cfg.n_embd},       {"vocab_size", cfg.vocab_size},
                         {"seq_len", T},               {"batch", B},
                         {"lrs", lrs},                 {"beta1", ocfg.beta1},
                         {"beta2", ocfg.beta2},        {"eps", ocfg.eps},
                         {"weight_decay", ocfg.weight_decay}, {"grad_clip", ocfg.grad_clip},
                         {"autocast", autocast}};
    std::ofstream(dir / "config.json") << jc.dump();
    std::string cmd = "/usr/bin/python3 " CRUCIBLE_SOURCE_DIR "/tests/parity/gpt2_torch.py --config " +
                      (dir / "config.json").string() + " --weights " +
                      (dir / "weights.safetensors").string() + " --tokens " +
                      (dir / "tokens.bin").string() + " --out " + (dir / "ref.safetensors").string();
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "PyTorch side failed: " << cmd;
    auto r = ckpt::read_safetensors((dir / "ref.safetensors").string());
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    ref = std::move(*r);
    in.resize(size_t(B) * T);
    tgt.resize(size_t(B) * T);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        in[b * T + t] = tokens[b * (T + 1) + t];
        tgt[b * T + t] = tokens[b * (T + 1) + t + 1];
      }
    fs::remove_all(dir);
  }
};

TEST(PytorchParity, LogitsLossGradientsAndThreeAdamWSteps) {
  TorchCase c;
  nn::GPT gpt(c.cfg);
  nn::ParamRegistry& P = gpt.params();
  ASSERT_NO_FATAL_FAILURE(c.run(gpt, ""));
  const nn::GPTConfig& cfg = c.cfg;
  const int B = c.B, T = c.T;
  const optim::AdamWConfig& ocfg = c.ocfg;
  const std::vector<float>& lrs = c.lrs;
  const std::vector<int32_t>& in = c.in;
  const std::vector<int32_t>& tgt = c.tgt;
  const ckpt::SafetensorsFile* ref = &c.ref;
  Arena arena("parity.activations");
  float loss = gpt.forward(arena, in.data(), tgt.data(), B, T);
  const ckpt::LoadedTensor* logits = ref->find("logits");
  ASSERT_NE(logits, nullptr);
  ASSERT_EQ(size_t(logits->numel()), size_t(B) * T * cfg.vocab_size);
  EXPECT_LE(rel_error(gpt.logits(), logits->f32(), size_t(logits->numel())), 1e-4) << "logits";
  EXPECT_LE(std::fabs(loss - ref->find("loss")->f32()[0]) / ref->find("loss")->f32()[0], 1e-4)
      << "loss " << loss << " vs " << ref->find("loss")->f32()[0];

  optim::AdamW opt(P, ocfg);
  const std::vector<float> before(P.values(), P.values() + P.numel());
  const float* norms = ref->find("grad_norms")->f32();
  for (int s = 0; s < 3; ++s) {
    arena.reset();
    P.zero_grad();
    gpt.forward(arena, in.data(), tgt.data(), B, T, 1.0f);
    gpt.backward(arena);
    if (s == 0) {
      for (const auto& spec : P.specs()) {
        const ckpt::LoadedTensor* g = ref->find("grad." + spec.name);
        ASSERT_NE(g, nullptr) << spec.name;
        ASSERT_EQ(size_t(g->numel()), spec.numel) << spec.name;
        EXPECT_LE(rel_error(P.grads() + spec.offset, g->f32(), spec.numel), 1e-4)
            << "gradient of " << spec.name;
      }
    }
    optim::StepInfo info = opt.step(lrs[s]);
    EXPECT_LE(std::fabs(info.grad_norm - norms[s]) / norms[s], 1e-4) << "grad norm, step " << s;
    EXPECT_LT(info.clip_scale, 1.0f) << "the test means to exercise clipping";
  }
  for (const auto& spec : P.specs()) {
    const ckpt::LoadedTensor* p = ref->find("param3." + spec.name);
    ASSERT_NE(p, nullptr) << spec.name;
    // The key bias has no gradient in exact arithmetic (softmax is invariant
    // to adding a constant to every score of a row), so what both sides hold
    // there is rounding noise, and Adam turns noise into lr-sized steps of
    // arbitrary sign: compare c_attn.bias without its key third.
    const bool qkv_bias = spec.name.find("attn.c_attn.bias") != std::string::npos;
    const float* got = P.values() + spec.offset;
    const float* was = before.data() + spec.offset;
    if (qkv_bias) {
      const size_t C = size_t(cfg.n_embd);
      EXPECT_LE(update_error(got, p->f32(), was, C), 5e-4) << "query bias: " << spec.name;
      EXPECT_LE(update_error(got + 2 * C, p->f32() + 2 * C, was + 2 * C, C), 5e-4)
          << "value bias: " << spec.name;
    } else {
      EXPECT_LE(update_error(got, p->f32(), was, spec.numel), 5e-4)
          << "parameter after 3 AdamW steps: " << spec.name;
    }
  }
}

// bf16: crucible's train.precision = "bf16" against PyTorch's CPU bf16
// autocast from the same weights. The two round in different places
// (autocast rounds every linear's output and runs its softmax on bf16 scores;
// crucible rounds the GEMM operands it stores, and on AVX512_BF16 attention's
// P, dO and dS as FlashAttention-2 does, and keeps the softmax statistics,
// the residual stream and LayerNorm inputs f32), so they agree to bf16's
// precision, not bit for bit: each side's logits carry a few roundings of
// relative size up to 2^-8 through 2 layers, ~1% of their scale; measured over
// seeds ~0.5%: the bound is 3e-2. The loss averages those errors over 111
// tokens: 1e-2 relative. A gradient tensor is compared by its L2 error
// relative to its L2 size (bf16 per-element error, ~1e-2, does not shrink
// in a max norm), bound 5e-2; together they must point the same way
// (cosine > 0.998). Measured over 5 seeds: logits 4-6e-3, the worst gradient
// tensor ~8e-3, cosine 0.99999 (with the pairs attention on Zen 4: logits
// 5.3e-3, worst gradient 6.2e-3, cosine 0.999992). The fp32 model is within these bounds of
// the bf16 reference as well, so the test also asserts that crucible's bf16
// logits are not its fp32 logits (bf16 really ran).
TEST(PytorchParity, Bf16AutocastLogitsLossAndGradients) {
  TorchCase c;
  nn::GPTPart part = nn::GPTPart::whole(c.cfg);
  part.precision = DType::bf16;
  nn::GPT gpt(c.cfg, part);
  nn::ParamRegistry& P = gpt.params();
  ASSERT_NO_FATAL_FAILURE(c.run(gpt, "bf16"));
  Arena arena("parity.activations");
  gpt.forward(arena, c.in.data(), nullptr, c.B, c.T);  // f32 logits from bf16 GEMMs
  const ckpt::LoadedTensor* logits = c.ref.find("logits");
  ASSERT_NE(logits, nullptr);
  const size_t nl = size_t(logits->numel());
  const double logit_err = rel_error(gpt.logits(), logits->f32(), nl);
  nn::GPT f32(c.cfg);
  std::copy(P.values(), P.values() + P.numel(), f32.params().values());
  Arena arena32("parity.activations");
  f32.forward(arena32, c.in.data(), nullptr, c.B, c.T);
  EXPECT_GT(rel_error(gpt.logits(), f32.logits(), nl), 1e-4) << "the bf16 model computed in fp32";
  arena.reset();
  const float loss = gpt.forward(arena, c.in.data(), c.tgt.data(), c.B, c.T, 1.0f);
  gpt.backward(arena);
  const float ref_loss = c.ref.find("loss")->f32()[0];
  // The peer's own bf16 GEMM error, measured by gpt2_torch.py on this
  // machine (autocast_matmul_error): ~2e-3 where torch accumulates in f32,
  // what the bounds above assume. Where it accumulates in bf16 (Debian's
  // torch 1.13 on CPUs without AVX512_BF16, ~1-4% per GEMM), the comparison
  // measures the peer: every bound widens by PEER x the peer's error, PEER
  // = 1.5 for the logits (their error over 2 layers, measured 1.7-3.8e-2 at
  // a peer error of 1.9e-2) and 4 for a gradient tensor (backward chains
  // twice as many GEMMs and the norm gradients sum them), and the cosine
  // by the square of it.
  const ckpt::LoadedTensor* peer_t = c.ref.find("matmul_error");
  const double peer = peer_t ? peer_t->f32()[0] : 0;
  const double peer_extra = peer > 1e-2 ? peer : 0;
  std::printf("[parity bf16] logits %.2e, loss %.6f vs %.6f; the peer's bf16 GEMM error %.2e\n", logit_err, loss,
              ref_loss, peer);
  EXPECT_LE(logit_err, 3e-2 + 1.5 * peer_extra) << "logits";
  EXPECT_LE(std::fabs(loss - ref_loss) / ref_loss, 1e-2) << "loss";
  double dot = 0, ng = 0, nr = 0, worst = 0;
  std::string worst_name;
  for (const auto& spec : P.specs()) {
    const ckpt::LoadedTensor* g = c.ref.find("grad." + spec.name);
    ASSERT_NE(g, nullptr) << spec.name;
    double diff = 0, size = 0;
    const bool qkv_bias = spec.name.find("attn.c_attn.bias") != std::string::npos;
    for (size_t i = 0; i < spec.numel; ++i) {
      const double a = P.grads()[spec.offset + i], b = g->f32()[i];
      dot += a * b, ng += a * a, nr += b * b;
      // The key bias's gradient is rounding noise on both sides (see above).
      if (qkv_bias && i >= size_t(c.cfg.n_embd) && i < 2 * size_t(c.cfg.n_embd)) continue;
      diff += (a - b) * (a - b), size += b * b;
    }
    const double rel = std::sqrt(diff / std::max(size, 1e-30));
    if (rel > worst) worst = rel, worst_name = spec.name;
    EXPECT_LE(rel, 5e-2 + 4 * peer_extra) << "gradient of " << spec.name;
  }
  const double cosine = dot / std::sqrt(ng * nr);
  std::printf("[parity bf16] gradients: worst tensor %.2e (%s), cosine %.6f\n", worst, worst_name.c_str(), cosine);
  EXPECT_GT(cosine, 0.998 - 16 * peer_extra * peer_extra);
}

}  // namespace
}  // namespace crucible
