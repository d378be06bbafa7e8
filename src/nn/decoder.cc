#include "nn/decoder.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/check.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"

namespace crucible::nn {
namespace {

const ParamSpec& spec_of(const GPT& model, const std::string& name) {
  const ParamSpec* spec = model.params().find(name);
  CRUCIBLE_CHECK(spec != nullptr, "[nn] Decoder: model lacks a GPT-2 parameter");
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

// GEMMs run on a few row counts only: n rounded up to 1, 2, 3, 4, then
// powers of two and their halves in between (6, 8, 12, 16, 24, ...), at most
// `cap`. oneDNN creates (JIT-compiles) a primitive per distinct shape, tens
// of milliseconds each: a continuously changing batch would otherwise pay
// that on every new row count. The extra rows compute on stale scratch and
// are never read; each row's result does not depend on the others (see the
// header), so padding changes no result.
int padded_rows(int n, int cap) {
  int m = n;
  if (n > 4) {
    int p = 4;
    while (p < n) p *= 2;             // the power of two at or above n
    m = (p / 4) * 3 >= n ? (p / 4) * 3 : p;  // or the 1.5x step below it
  }
  return std::min(m, cap);
}

}  // namespace

Decoder::Decoder(const GPT& model, int max_rows, int max_seqs, bool pack_weights)
    : cfg_(model.config()),
      bf16_(model.part().precision == DType::bf16),
      max_rows_(max_rows),
      max_seqs_(max_seqs) {
  const int L = cfg_.n_layer, C = cfg_.n_embd, R = max_rows, V = cfg_.vocab_size;
  CRUCIBLE_CHECK(C % cfg_.n_head == 0 && C / cfg_.n_head <= 256,
                 "[nn] Decoder: head size must divide n_embd and be <= 256");
  CRUCIBLE_CHECK(max_rows >= 1 && max_seqs >= 1 && max_seqs <= max_rows,
                 "[nn] Decoder: needs 1 <= max_seqs <= max_rows");
  wte_ = weight(model, "transformer.wte.weight");
  wpe_ = weight(model, "transformer.wpe.weight");
  lnfw_ = weight(model, "transformer.ln_f.weight");
  lnfb_ = weight(model, "transformer.ln_f.bias");
  auto matrix = [&](const std::string& name, int N, int K, bool trans) {
    Matrix m{weight(model, name), weight16(model, name), {}, N, K, trans};
    if (pack_weights) {
      const int ldb = trans ? K : N;
      m.packed = bf16_ ? kernels::PackedWeights(DType::bf16, trans, N, K, m.b16, ldb)
                       : kernels::PackedWeights(DType::f32, trans, N, K, m.f32, ldb);
    }
    return m;
  };
  head_ = matrix("transformer.wte.weight", V, C, /*trans=*/true);
  layers_.resize(L);
  for (int l = 0; l < L; ++l) {
    std::string p = "transformer.h." + std::to_string(l) + ".";
    auto w = [&](const char* name) { return weight(model, p + name); };
    LayerWeights& lw = layers_[l];
    lw.ln1w = w("ln_1.weight");
    lw.ln1b = w("ln_1.bias");
    lw.attb = w("attn.c_attn.bias");
    lw.prjb = w("attn.c_proj.bias");
    lw.ln2w = w("ln_2.weight");
    lw.ln2b = w("ln_2.bias");
    lw.fcb = w("mlp.c_fc.bias");
    lw.mpb = w("mlp.c_proj.bias");
    lw.att = matrix(p + "attn.c_attn.weight", 3 * C, C, false);
    lw.prj = matrix(p + "attn.c_proj.weight", C, C, false);
    lw.fc = matrix(p + "mlp.c_fc.weight", 4 * C, C, false);
    lw.mp = matrix(p + "mlp.c_proj.weight", C, 4 * C, false);
  }
  row_seq_.resize(size_t(R));
  row_pos_.resize(size_t(R));
  row_tables_.resize(size_t(R));
  seq_blocks_.resize(size_t(max_seqs));
  if (bf16_) x16_ = Tensor::empty({R, 4 * C}, DType::bf16, "nn.decoder.scratch");
  resid_a_ = Tensor::empty({R, C}, DType::f32, "nn.decoder.scratch");
  resid_b_ = Tensor::empty({R, C}, DType::f32, "nn.decoder.scratch");
  h_ = Tensor::empty({R, C}, DType::f32, "nn.decoder.scratch");
  branch_ = Tensor::empty({R, C}, DType::f32, "nn.decoder.scratch");
  qkv_ = Tensor::empty({R, 3 * C}, DType::f32, "nn.decoder.scratch");
  att_ = Tensor::empty({R, C}, DType::f32, "nn.decoder.scratch");
  fc_pre_ = Tensor::empty({R, 4 * C}, DType::f32, "nn.decoder.scratch");
  fc_act_ = Tensor::empty({R, 4 * C}, DType::f32, "nn.decoder.scratch");
  mean_ = Tensor::empty({R}, DType::f32, "nn.decoder.scratch");
  rstd_ = Tensor::empty({R}, DType::f32, "nn.decoder.scratch");
  logits_ = Tensor::empty({max_seqs, V}, DType::f32, "nn.decoder.logits");
  // Padded GEMM rows read scratch no kernel wrote yet: zeros, never garbage
  // (denormals or NaNs would only cost time, but cost it).
  for (Tensor* t : {&resid_a_, &resid_b_, &h_, &branch_, &qkv_, &att_, &fc_pre_, &fc_act_})
    std::fill(t->f32(), t->f32() + t->numel(), 0.0f);
  if (bf16_) std::fill(x16_.bf16_data(), x16_.bf16_data() + x16_.numel(), bf16{});
}

void Decoder::warm_up() {
  const LayerWeights& w = layers_[0];
  for (int n = 1; n <= max_rows_; n = padded_rows(n, max_rows_) + 1) {
    const int m = padded_rows(n, max_rows_);
    matmul(qkv_.f32(), h_.f32(), w.att, m, w.attb);
    matmul(branch_.f32(), att_.f32(), w.prj, m, w.prjb);
    matmul(fc_pre_.f32(), h_.f32(), w.fc, m, nullptr);
    matmul(branch_.f32(), fc_act_.f32(), w.mp, m, w.mpb);
    if (m <= max_seqs_) matmul(logits_.f32(), h_.f32(), head_, m, nullptr);
  }
}

size_t Decoder::block_floats(int block_tokens) const {
  return size_t(cfg_.n_layer) * 2 * size_t(block_tokens) * size_t(cfg_.n_embd);
}

void Decoder::matmul(float* y, const float* x, const Matrix& w, int n, const float* bias) {
  const int N = w.N, K = w.K, ldb = w.trans ? K : N;
  n = padded_rows(n, w.trans ? max_seqs_ : max_rows_);  // trans: the LM head, (max_seqs,V) out
  const void* a = x;
  if (bf16_) {
    bf16* x16 = x16_.bf16_data();
    kernels::convert_to_bf16(x16, x, size_t(n) * K);
    a = x16;
  }
  if (w.packed) kernels::gemm_packed(n, a, K, w.packed, y, N, bias);
  else if (bf16_) kernels::gemm_rows_invariant(DType::bf16, w.trans, n, N, K, a, K, w.b16, ldb, y, N, bias);
  else kernels::gemm_rows_invariant(DType::f32, w.trans, n, N, K, x, K, w.f32, ldb, y, N, bias);
}

// Rows of every sequence, stacked (R,C). Same sequence of fused kernels as
// GPT::forward: block l's ln_1 forms r = r_mid + mlp_out of block l-1, its
// ln_2 forms r_mid = r + attn_out.
const float* Decoder::forward(const DecodeSeq* seqs, int n_seqs, const KvView& kv) {
  const int C = cfg_.n_embd, V = cfg_.vocab_size;
  CRUCIBLE_CHECK(n_seqs >= 1 && n_seqs <= max_seqs_, "[nn] Decoder::forward: 1..max_seqs sequences");
  CRUCIBLE_CHECK(kv.base != nullptr && kv.block_tokens >= 1, "[nn] Decoder::forward: no KV storage");
  int R = 0;
  for (int s = 0; s < n_seqs; ++s) {
    const DecodeSeq& q = seqs[s];
    CRUCIBLE_CHECK(q.n >= 1 && q.pos >= 0 && q.pos + q.n <= cfg_.seq_len,
                   "[nn] Decoder::forward: a sequence past model.seq_len (slide the window)");
    CRUCIBLE_CHECK(R + q.n <= max_rows_, "[nn] Decoder::forward: more rows than max_rows");
    for (int i = 0; i < q.n; ++i) {
      CRUCIBLE_CHECK(q.tokens[i] >= 0 && q.tokens[i] < V, "[nn] Decoder: token id outside vocab");
      row_seq_[size_t(R)] = s;
      row_pos_[size_t(R)] = q.pos + i;
      ++R;
    }
    seq_blocks_[size_t(s)] = q.blocks;
  }
  float* x = resid_a_.f32();       // (R,C) residual stream
  float* x_next = resid_b_.f32();  // (R,C) where the next residual sum goes
  float* h = h_.f32();             // (R,C)
  float* branch = branch_.f32();   // (R,C) attention or MLP output to add to x
  float* qkv = qkv_.f32();         // (R,3C)
  float* att = att_.f32();         // (R,C)
  float* pre = fc_pre_.f32();      // (R,4C)
  float* act = fc_act_.f32();      // (R,4C)
  float* mean = mean_.f32();
  float* rstd = rstd_.f32();

  // x = wte[tokens] + wpe[pos + t]: the kernel indexes wpe from its row 0.
  for (int s = 0, r = 0; s < n_seqs; r += seqs[s].n, ++s)
    kernels::embedding_forward(x + size_t(r) * C, seqs[s].tokens, wte_, wpe_ + size_t(seqs[s].pos) * C,
                               1, seqs[s].n, C);
  bool pending = false;  // branch holds an MLP output not yet added to x
  for (int l = 0; l < cfg_.n_layer; ++l) {
    const LayerWeights& w = layers_[l];
    if (pending) {
      kernels::residual_layernorm_forward(x_next, h, mean, rstd, x, branch, w.ln1w, w.ln1b, R, C);
      std::swap(x, x_next);
    } else {
      kernels::residual_layernorm_forward(nullptr, h, mean, rstd, x, nullptr, w.ln1w, w.ln1b, R, C);
    }
    matmul(qkv, h, w.att, R, w.attb);
    attend(att, qkv, l, R, kv);
    matmul(branch, att, w.prj, R, w.prjb);
    kernels::residual_layernorm_forward(x_next, h, mean, rstd, x, branch, w.ln2w, w.ln2b, R, C);
    std::swap(x, x_next);
    matmul(pre, h, w.fc, R, nullptr);
    kernels::bias_gelu_forward(act, pre, w.fcb, R, 4 * C);
    matmul(branch, act, w.mp, R, w.mpb);
    pending = true;
  }
  // Only the last row of each sequence that asks gets logits: ln_f on those
  // rows, gathered into h (k,C), then the tied LM head.
  int k = 0;
  for (int s = 0, r = 0; s < n_seqs; r += seqs[s].n, ++s) {
    if (!seqs[s].logits) continue;
    const size_t last = size_t(r + seqs[s].n - 1) * C;
    kernels::residual_layernorm_forward(nullptr, h + size_t(k) * C, mean, rstd, x + last,
                                        branch + last, lnfw_, lnfb_, 1, C);
    ++k;
  }
  float* logits = logits_.f32();
  if (k > 0) matmul(logits, h, head_, k, nullptr);
  return logits;
}

// qkv (R,3C); y (R,C). Writes each row's k, v into its sequence's block at
// its position, then attends over the cache (kernels::attention_paged).
void Decoder::attend(float* y, const float* qkv, int l, int R, const KvView& kv) {
  const int C = cfg_.n_embd, L = cfg_.n_layer, bt = kv.block_tokens;
  const size_t block_stride = size_t(L) * 2 * bt * C;
  const float* layer = kv.base + size_t(l) * 2 * bt * C;  // layer l's keys in block 0
  for (int r = 0; r < R; ++r) {
    const int p = row_pos_[size_t(r)];
    const int32_t* table = seq_blocks_[size_t(row_seq_[size_t(r)])];
    row_tables_[size_t(r)] = table;
    float* kb = kv.base + size_t(table[p / bt]) * block_stride + size_t(l) * 2 * bt * C + size_t(p % bt) * C;
    const float* row = qkv + size_t(r) * 3 * C;
    std::copy(row + C, row + 2 * C, kb);
    std::copy(row + 2 * C, row + 3 * C, kb + size_t(bt) * C);
  }
  kernels::attention_paged(y, qkv, 3 * C, layer, block_stride, bt, row_tables_.data(), row_pos_.data(), R,
                           C, cfg_.n_head);
}

}  // namespace crucible::nn
