#include "nn/generator.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/check.h"
#include "core/kernel_stats.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"

namespace crucible::nn {
namespace {

const ParamSpec& spec_of(const GPT& model, const std::string& name) {
  const ParamSpec* spec = model.params().find(name);
  CRUCIBLE_CHECK(spec != nullptr, "[nn] Generator: model lacks a GPT-2 parameter");
  return *spec;
}
const float* weight(const GPT& model, const std::string& name) {
  return model.params().values() + spec_of(model, name).offset;
}
// The bf16 copy (null in an f32 model).
const bf16* weight16(const GPT& model, const std::string& name) {
  const bf16* base = model.params().values_bf16();
  return base ? base + spec_of(model, name).offset : nullptr;
}

}  // namespace

Generator::Generator(const GPT& model)
    : cfg_(model.config()), bf16_(model.part().precision == DType::bf16) {
  const int L = cfg_.n_layer, C = cfg_.n_embd, T = cfg_.seq_len, V = cfg_.vocab_size;
  CRUCIBLE_CHECK(C % cfg_.n_head == 0 && C / cfg_.n_head <= 256,
                 "[nn] Generator: head size must divide n_embd and be <= 256");
  wte_ = weight(model, "transformer.wte.weight");
  wte16_ = weight16(model, "transformer.wte.weight");
  wpe_ = weight(model, "transformer.wpe.weight");
  lnfw_ = weight(model, "transformer.ln_f.weight");
  lnfb_ = weight(model, "transformer.ln_f.bias");
  layers_.resize(L);
  for (int l = 0; l < L; ++l) {
    std::string p = "transformer.h." + std::to_string(l) + ".";
    auto w = [&](const char* name) { return weight(model, p + name); };
    layers_[l] =
        LayerWeights{w("ln_1.weight"),      w("ln_1.bias"),          w("attn.c_attn.weight"),
                     w("attn.c_attn.bias"), w("attn.c_proj.weight"), w("attn.c_proj.bias"),
                     w("ln_2.weight"),      w("ln_2.bias"),          w("mlp.c_fc.weight"),
                     w("mlp.c_fc.bias"),    w("mlp.c_proj.weight"),  w("mlp.c_proj.bias")};
    auto w16 = [&](const char* name) { return weight16(model, p + name); };
    layers_[l].attw16 = w16("attn.c_attn.weight");
    layers_[l].prjw16 = w16("attn.c_proj.weight");
    layers_[l].fcw16 = w16("mlp.c_fc.weight");
    layers_[l].mpw16 = w16("mlp.c_proj.weight");
  }
  if (bf16_) x16_ = Tensor::empty({T, 4 * C}, DType::bf16, "nn.generator.scratch");
  k_cache_ = Tensor::empty({L, T, C}, DType::f32, "nn.generator.kv_cache");
  v_cache_ = Tensor::empty({L, T, C}, DType::f32, "nn.generator.kv_cache");
  resid_a_ = Tensor::empty({T, C}, DType::f32, "nn.generator.scratch");
  resid_b_ = Tensor::empty({T, C}, DType::f32, "nn.generator.scratch");
  h_ = Tensor::empty({T, C}, DType::f32, "nn.generator.scratch");
  branch_ = Tensor::empty({T, C}, DType::f32, "nn.generator.scratch");
  qkv_ = Tensor::empty({T, 3 * C}, DType::f32, "nn.generator.scratch");
  att_ = Tensor::empty({T, C}, DType::f32, "nn.generator.scratch");
  fc_pre_ = Tensor::empty({T, 4 * C}, DType::f32, "nn.generator.scratch");
  fc_act_ = Tensor::empty({T, 4 * C}, DType::f32, "nn.generator.scratch");
  mean_ = Tensor::empty({T}, DType::f32, "nn.generator.scratch");
  rstd_ = Tensor::empty({T}, DType::f32, "nn.generator.scratch");
  logits_ = Tensor::empty({V}, DType::f32, "nn.generator.logits");
}

void Generator::reset() { pos_ = 0; }

void Generator::matmul(float* y, const float* x, const float* w, const bf16* w16, int n, int N, int K,
                       const float* bias, bool trans) {
  const int ldb = trans ? K : N;
  if (!bf16_) {
    kernels::gemm(false, trans, n, N, K, x, K, w, ldb, y, N, false, bias);
    return;
  }
  bf16* x16 = x16_.bf16_data();
  kernels::convert_to_bf16(x16, x, size_t(n) * K);
  kernels::gemm(DType::bf16, DType::f32, false, trans, n, N, K, x16, K, w16, ldb, y, N, false, bias);
}

// tokens (n) at positions pos_ .. pos_+n-1 -> logits (V) of the last one.
// Same sequence of fused kernels as GPT::forward: block l's ln_1 forms
// r = r_mid + mlp_out of block l-1, its ln_2 forms r_mid = r + attn_out.
const float* Generator::append(const int32_t* tokens, int n) {
  CRUCIBLE_CHECK(n >= 1, "[nn] Generator::append needs at least one token");
  CRUCIBLE_CHECK(pos_ + n <= cfg_.seq_len,
                 "[nn] Generator::append past model.seq_len (slide the window)");
  const int C = cfg_.n_embd, V = cfg_.vocab_size;
  for (int i = 0; i < n; ++i)
    CRUCIBLE_CHECK(tokens[i] >= 0 && tokens[i] < V, "[nn] Generator: token id outside vocab");
  float* x = resid_a_.f32();       // (n,C) residual stream
  float* x_next = resid_b_.f32();  // (n,C) where the next residual sum goes
  float* h = h_.f32();             // (n,C)
  float* branch = branch_.f32();   // (n,C) attention or MLP output to add to x
  float* qkv = qkv_.f32();         // (n,3C)
  float* att = att_.f32();         // (n,C)
  float* pre = fc_pre_.f32();      // (n,4C)
  float* act = fc_act_.f32();      // (n,4C)
  float* mean = mean_.f32();
  float* rstd = rstd_.f32();

  // x = wte[tokens] + wpe[pos_ + t]: the kernel indexes wpe from its row 0.
  kernels::embedding_forward(x, tokens, wte_, wpe_ + size_t(pos_) * C, 1, n, C);
  bool pending = false;  // branch holds an MLP output not yet added to x
  for (int l = 0; l < cfg_.n_layer; ++l) {
    const LayerWeights& w = layers_[l];
    if (pending) {
      kernels::residual_layernorm_forward(x_next, h, mean, rstd, x, branch, w.ln1w, w.ln1b, n, C);
      std::swap(x, x_next);
    } else {
      kernels::residual_layernorm_forward(nullptr, h, mean, rstd, x, nullptr, w.ln1w, w.ln1b, n, C);
    }
    matmul(qkv, h, w.attw, w.attw16, n, 3 * C, C, w.attb);
    attend(att, qkv, l, n);
    matmul(branch, att, w.prjw, w.prjw16, n, C, C, w.prjb);
    kernels::residual_layernorm_forward(x_next, h, mean, rstd, x, branch, w.ln2w, w.ln2b, n, C);
    std::swap(x, x_next);
    matmul(pre, h, w.fcw, w.fcw16, n, 4 * C, C, nullptr);
    kernels::bias_gelu_forward(act, pre, w.fcb, n, 4 * C);
    matmul(branch, act, w.mpw, w.mpw16, n, C, 4 * C, w.mpb);
    pending = true;
  }
  // Only the last row's logits are returned: ln_f and the tied LM head on it.
  const size_t last = size_t(n - 1) * C;
  kernels::residual_layernorm_forward(nullptr, h, mean, rstd, x + last, branch + last, lnfw_, lnfb_,
                                      1, C);
  float* logits = logits_.f32();
  matmul(logits, h, wte_, wte16_, 1, V, C, nullptr, /*trans=*/true);
  pos_ += n;
  return logits;
}

// qkv (n,3C) rows at positions pos_+i; y (n,C). Writes their k, v into the
// cache, then per (row, head) one pass over keys 0..pos_+i with an online
// softmax (running max and sum, accumulator rescaled when the max grows), so
// no score row is stored and rows and heads run in parallel without scratch.
void Generator::attend(float* y, const float* qkv, int l, int n) {
  const int C = cfg_.n_embd, NH = cfg_.n_head, hs = C / NH;
  const size_t layer = size_t(l) * cfg_.seq_len * C;
  float* kc = k_cache_.f32() + layer;  // (seq_len,C)
  float* vc = v_cache_.f32() + layer;  // (seq_len,C)
  for (int i = 0; i < n; ++i) {
    const float* row = qkv + size_t(i) * 3 * C;
    std::copy(row + C, row + 2 * C, kc + size_t(pos_ + i) * C);
    std::copy(row + 2 * C, row + 3 * C, vc + size_t(pos_ + i) * C);
  }
  const double keys = double(n) * pos_ + 0.5 * double(n) * (n + 1);  // summed over rows
  ScopedKernelTimer timer(KernelClass::attention, 4.0 * keys * C);
  const float scale = 1.0f / std::sqrt(float(hs));
  const int p0 = pos_;
#pragma omp parallel for collapse(2) schedule(static) if (keys * C > 65536.0)
  for (int i = 0; i < n; ++i) {
    for (int h = 0; h < NH; ++h) {
      const float* q = qkv + size_t(i) * 3 * C + h * hs;
      float acc[256];  // hs <= 256 (GPTConfig::validate)
      std::fill(acc, acc + hs, 0.0f);
      float mx = -INFINITY, sum = 0.0f;
      for (int s = 0; s <= p0 + i; ++s) {
        const float* k = kc + size_t(s) * C + h * hs;
        const float* v = vc + size_t(s) * C + h * hs;
        float d = 0.0f;
#pragma omp simd reduction(+ : d)
        for (int c = 0; c < hs; ++c) d += q[c] * k[c];
        d *= scale;
        if (d > mx) {
          float shrink = std::exp(mx - d);  // 0 for the first key
          sum *= shrink;
          for (int c = 0; c < hs; ++c) acc[c] *= shrink;
          mx = d;
        }
        float p = std::exp(d - mx);
        sum += p;
#pragma omp simd
        for (int c = 0; c < hs; ++c) acc[c] += p * v[c];
      }
      float* o = y + size_t(i) * C + h * hs;
      const float inv = 1.0f / sum;
      for (int c = 0; c < hs; ++c) o[c] = acc[c] * inv;
    }
  }
}

std::vector<int32_t> generate(Generator& gen, const std::vector<int32_t>& prompt, int n_new,
                              int32_t bos_token, const SamplingConfig& cfg, Rng& rng,
                              const std::function<void(int32_t)>& on_token,
                              const std::function<bool()>& stop) {
  std::vector<int32_t> out;
  if (n_new <= 0) return out;
  out.reserve(size_t(n_new));
  // context: every token of the sequence; the cache holds a suffix of it.
  std::vector<int32_t> context = prompt.empty() ? std::vector<int32_t>{bos_token} : prompt;
  const int cap = gen.capacity();
  const int V = cfg.vocab > 0 ? std::min(cfg.vocab, gen.vocab_size()) : gen.vocab_size();
  gen.reset();
  const int first = int(std::min<size_t>(context.size(), size_t(cap)));
  const float* logits = gen.append(context.data() + context.size() - first, first);
  for (int i = 0; i < n_new; ++i) {
    int32_t tok = sample_token(logits, V, cfg, rng);
    out.push_back(tok);
    context.push_back(tok);
    if (on_token) on_token(tok);
    if (i + 1 == n_new || (stop && stop())) break;
    if (gen.position() < cap) {
      logits = gen.append(&tok, 1);
    } else {
      // Context full: keep the last half (at least the new token) and re-prime.
      const int keep = std::max(1, cap / 2);
      gen.reset();
      logits = gen.append(context.data() + context.size() - keep, keep);
    }
  }
  return out;
}

}  // namespace crucible::nn
