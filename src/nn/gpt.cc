#include "nn/gpt.h"

#include <cmath>
#include <string>

#include "kernels/gemm.h"
#include "kernels/kernels.h"

namespace crucible::nn {

Status GPTConfig::validate() const {
  auto bad = [](const char* key, const std::string& why) {
    return Status::invalid(std::string("[config] model.") + key + ": " + why);
  };
  if (n_layer < 1) return bad("n_layer", "must be >= 1");
  if (n_head < 1) return bad("n_head", "must be >= 1");
  if (n_embd < 1) return bad("n_embd", "must be >= 1");
  if (n_embd % n_head != 0)
    return bad("n_embd", std::to_string(n_embd) + " is not divisible by n_head = " +
                             std::to_string(n_head));
  if (n_embd / n_head > 256) return bad("n_embd", "head size n_embd/n_head must be <= 256");
  if (vocab_size < 2) return bad("vocab_size", "must be >= 2");
  if (seq_len < 1) return bad("seq_len", "must be >= 1");
  return Status::ok();
}

int64_t GPTConfig::matmul_params() const {
  int64_t C = n_embd;
  int64_t per_layer = C * 3 * C + 3 * C + C * C + C + C * 4 * C + 4 * C + 4 * C * C + C + 4 * C;
  return int64_t(vocab_size) * C + n_layer * per_layer + 2 * C;
}

double GPTConfig::flops_per_token(int T) const {
  return 6.0 * double(matmul_params()) + 12.0 * n_layer * n_embd * double(T);
}

namespace {

struct LayerIdx {
  size_t ln1w, ln1b, attw, attb, prjw, prjb, ln2w, ln2b, fcw, fcb, mpw, mpb;
};

// Registers every parameter, in memory order (HF GPT-2 names); the one
// definition of the model's parameters, for the model and for size queries.
void register_params(const GPTConfig& cfg, ParamRegistry& P, size_t* wte, size_t* wpe,
                     std::vector<LayerIdx>* idx, size_t* lnfw, size_t* lnfb) {
  const int C = cfg.n_embd, L = cfg.n_layer;
  const float std = 0.02f, proj_std = 0.02f / std::sqrt(2.0f * L);
  *wte = P.add("transformer.wte.weight", {cfg.vocab_size, C}, false, Init::normal, std);
  *wpe = P.add("transformer.wpe.weight", {cfg.seq_len, C}, false, Init::normal, std);
  idx->resize(size_t(L));
  for (int l = 0; l < L; ++l) {
    std::string p = "transformer.h." + std::to_string(l) + ".";
    auto& i = (*idx)[size_t(l)];
    i.ln1w = P.add(p + "ln_1.weight", {C}, false, Init::ones);
    i.ln1b = P.add(p + "ln_1.bias", {C}, false, Init::zeros);
    i.attw = P.add(p + "attn.c_attn.weight", {C, 3 * C}, true, Init::normal, std);
    i.attb = P.add(p + "attn.c_attn.bias", {3 * C}, false, Init::zeros);
    i.prjw = P.add(p + "attn.c_proj.weight", {C, C}, true, Init::normal, proj_std);
    i.prjb = P.add(p + "attn.c_proj.bias", {C}, false, Init::zeros);
    i.ln2w = P.add(p + "ln_2.weight", {C}, false, Init::ones);
    i.ln2b = P.add(p + "ln_2.bias", {C}, false, Init::zeros);
    i.fcw = P.add(p + "mlp.c_fc.weight", {C, 4 * C}, true, Init::normal, std);
    i.fcb = P.add(p + "mlp.c_fc.bias", {4 * C}, false, Init::zeros);
    i.mpw = P.add(p + "mlp.c_proj.weight", {4 * C, C}, true, Init::normal, proj_std);
    i.mpb = P.add(p + "mlp.c_proj.bias", {C}, false, Init::zeros);
  }
  *lnfw = P.add("transformer.ln_f.weight", {C}, false, Init::ones);
  *lnfb = P.add("transformer.ln_f.bias", {C}, false, Init::zeros);
}

// Bytes an Arena hands out for n floats (64-byte alignment).
size_t arena_floats(size_t n) { return (n * sizeof(float) + 63) / 64 * 64; }

}  // namespace

size_t GPT::flat_params(const GPTConfig& cfg) {
  ParamRegistry P;
  size_t wte, wpe, lnfw, lnfb;
  std::vector<LayerIdx> idx;
  register_params(cfg, P, &wte, &wpe, &idx, &lnfw, &lnfb);
  return (P.numel() + 15) / 16 * 16;  // as allocate() pads it
}

// Mirrors the arena allocations of forward() and backward() below and in the
// layers (block.cc, attention.cc, mlp.cc, layernorm.cc); the test
// (tests/nn/memory_estimate_test.cc) holds it to Arena::high_water().
size_t GPT::activation_bytes(const GPTConfig& cfg, int B, int T) {
  const size_t N = size_t(B) * T, C = size_t(cfg.n_embd), NC = N * C;
  const auto a = arena_floats;
  auto layernorm = [&] { return 2 * a(N); };  // mean, rstd
  size_t fwd = a(NC);                         // x
  for (int l = 0; l < cfg.n_layer; ++l) {
    fwd += (l > 0 ? a(NC) : 0) + 5 * a(NC);                          // r, h, attn_out, mlp_out, h2, r_mid
    fwd += layernorm() + a(3 * NC) + a(NC) + a(size_t(B) * cfg.n_head * T);  // ln_1; qkv, y, lse
    fwd += layernorm() + 2 * a(4 * NC);                              // ln_2; pre, act
  }
  fwd += 2 * a(NC) + layernorm() + a(N * size_t(cfg.vocab_size)) + a(N);  // r_final, lnf_out; logits, losses
  // backward: dh, dr for the whole pass, then one block's scratch at a time
  // (its dh and the larger of the MLP's dact and attention's dy + dqkv).
  const size_t block_scratch = a(NC) + std::max(a(4 * NC), a(NC) + a(3 * NC));
  return fwd + 2 * a(NC) + block_scratch;
}

GPT::GPT(const GPTConfig& cfg) : cfg_(cfg) {
  const int C = cfg.n_embd, L = cfg.n_layer;
  auto& P = params_;
  size_t wte, wpe, lnfw, lnfb;
  std::vector<LayerIdx> idx;
  register_params(cfg, P, &wte, &wpe, &idx, &lnfw, &lnfb);
  P.allocate();

  embed_ = Embedding{P.param(wte), P.param(wpe), cfg.vocab_size, C};
  auto linear = [&](size_t w, size_t b, int in, int out) {
    Linear lin;
    lin.w = P.param(w);
    lin.b = P.param(b);
    lin.in = in;
    lin.out = out;
    return lin;
  };
  auto layernorm = [&](size_t w, size_t b) {
    LayerNorm ln;
    ln.w = P.param(w);
    ln.b = P.param(b);
    ln.C = C;
    return ln;
  };
  blocks_.resize(L);
  for (int l = 0; l < L; ++l) {
    auto& i = idx[l];
    Block& bl = blocks_[l];
    bl.C = C;
    bl.ln_1 = layernorm(i.ln1w, i.ln1b);
    bl.ln_2 = layernorm(i.ln2w, i.ln2b);
    bl.attn.c_attn = linear(i.attw, i.attb, C, 3 * C);
    bl.attn.c_proj = linear(i.prjw, i.prjb, C, C);
    bl.attn.C = C;
    bl.attn.NH = cfg.n_head;
    bl.mlp.c_fc = linear(i.fcw, i.fcb, C, 4 * C);
    bl.mlp.c_proj = linear(i.mpw, i.mpb, 4 * C, C);
    bl.mlp.C = C;
  }
  ln_f_ = layernorm(lnfw, lnfb);
}

float GPT::forward(Arena& arena, const int32_t* tokens, const int32_t* targets, int B, int T,
                   float grad_scale) {
  CRUCIBLE_CHECK(T >= 1 && T <= cfg_.seq_len, "[nn] sequence longer than model.seq_len");
  const int C = cfg_.n_embd, V = cfg_.vocab_size, N = B * T;
  B_ = B;
  T_ = T;
  float* x = arena.allocate_array<float>(size_t(N) * C);
  embed_.forward(x, tokens, B, T);
  float* ra = x;
  float* rb = nullptr;
  for (auto& bl : blocks_) bl.forward(arena, ra, rb, &ra, &rb, B, T);
  float* r_final = arena.allocate_array<float>(size_t(N) * C);
  lnf_out_ = arena.allocate_array<float>(size_t(N) * C);
  ln_f_.forward(arena, lnf_out_, r_final, ra, rb, N);
  // Tied LM head: logits (N,V) = lnf_out (N,C) @ wte^T
  logits_ = arena.allocate_array<float>(size_t(N) * V);
  kernels::gemm(false, true, N, V, C, lnf_out_, C, embed_.wte.value, C, logits_, V, false);
  have_grad_ = false;
  if (!targets) return 0.0f;
  losses_ = arena.allocate_array<float>(size_t(N));
  float dscale = grad_scale / float(N);
  kernels::softmax_cross_entropy(losses_, logits_, targets, N, V, dscale);
  have_grad_ = grad_scale != 0.0f;
  double sum = 0;
  for (int i = 0; i < N; ++i) sum += losses_[i];
  return float(sum / N);
}

void GPT::backward(Arena& arena, const GradsReady& grads_ready) {
  CRUCIBLE_CHECK(have_grad_, "[nn] backward() without a training forward (grad_scale != 0)");
  const int C = cfg_.n_embd, V = cfg_.vocab_size, B = B_, T = T_, N = B * T;
  const float* dlogits = logits_;
  float* dh = arena.allocate_array<float>(size_t(N) * C);
  float* dr = arena.allocate_array<float>(size_t(N) * C);
  // LM head: dlnf (N,C) = dlogits (N,V) @ wte (V,C) ; dwte (V,C) += dlogits^T @ lnf_out
  kernels::gemm(false, false, N, C, V, dlogits, V, embed_.wte.value, C, dh, C, false);
  kernels::gemm(true, false, V, C, N, dlogits, V, lnf_out_, C, embed_.wte.grad, C, true);
  std::fill(dr, dr + size_t(N) * C, 0.0f);
  ln_f_.backward(dr, dh, N);
  // Parameters are laid out in forward order, so backward finalises the flat
  // gradient buffer from its end towards offset 0 (wte last: the LM head and
  // the embedding both add to it).
  auto ready_from = [&](const float* grad) {
    if (grads_ready) grads_ready(size_t(grad - params_.grads()));
  };
  ready_from(ln_f_.w.grad);
  for (int l = int(blocks_.size()) - 1; l >= 0; --l) {
    blocks_[l].backward(arena, dr, B, T);
    ready_from(blocks_[l].ln_1.w.grad);
  }
  embed_.backward(dr, B, T);
  if (grads_ready) grads_ready(0);
  have_grad_ = false;
}

}  // namespace crucible::nn
