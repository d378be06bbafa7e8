#include "nn/gpt.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "nn/cross_entropy.h"

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

struct PartIdx {
  size_t wte = SIZE_MAX, wpe = SIZE_MAX, lnfw = SIZE_MAX, lnfb = SIZE_MAX;
  std::vector<std::vector<LayerIdx>> chunks;
};

void check_part(const GPTConfig& cfg, const GPTPart& part) {
  CRUCIBLE_CHECK(!part.chunks.empty(), "[nn] a model part holds at least one chunk");
  int prev = 0;
  for (const BlockRange& r : part.chunks) {
    CRUCIBLE_CHECK(r.first >= prev && r.first < r.last && r.last <= cfg.n_layer,
                   "[nn] model chunks are ascending, disjoint, non-empty block ranges");
    prev = r.last;
  }
  CRUCIBLE_CHECK(!part.embedding || part.chunks.front().first == 0,
                 "[nn] the embedding's chunk starts at block 0");
  CRUCIBLE_CHECK(!part.head || part.chunks.back().last == cfg.n_layer,
                 "[nn] the head's chunk ends at the last block");
  CRUCIBLE_CHECK(part.tp >= 1 && part.tp_rank >= 0 && part.tp_rank < part.tp &&
                     cfg.n_head % part.tp == 0 && 4 * cfg.n_embd % part.tp == 0,
                 "[nn] a tensor-parallel part holds whole heads and equal MLP shares");
  CRUCIBLE_CHECK(!part.embedding_rows || (part.embedding && part.head && part.num_chunks() == 1),
                 "[nn] embedding rows apart from wte's gradient need the embedding and the head in one chunk");
}

// Registers the part's parameters, in memory order (HF GPT-2 names); the one
// definition of the model's parameters, for the model and for size queries.
// Backward finalises the buffer from its end, so wte comes first wherever it
// is (embedding or head: its gradient is final only at the end of backward,
// after the tied copies are summed), then wpe, the chunks' blocks, ln_f;
// with embedding_rows wte comes last instead, final once the head is done.
//
// Tensor-parallel shards (nn/tensor_parallel.h): wte's rows, c_attn's and
// c_fc's columns, the two c_proj's rows; what every rank of the group holds
// whole is a replica on all but the first, so it is counted once.
//
// max_blocks: register only the first that many blocks (flat_params' size
// query; a model never does).
PartIdx register_params(const GPTConfig& cfg, const GPTPart& part, ParamRegistry& P,
                        int max_blocks = std::numeric_limits<int>::max()) {
  check_part(cfg, part);
  const int C = cfg.n_embd, L = cfg.n_layer, tp = part.tp, r = part.tp_rank;
  const float std = 0.02f, proj_std = 0.02f / std::sqrt(2.0f * L);
  auto split = [&](int dim, std::vector<Shard::Piece> pieces) {
    return tp == 1 ? Shard{} : Shard{dim, std::move(pieces)};
  };
  const IndexRange heads = shard_range(cfg.n_head, tp, r), vocab = shard_range(cfg.vocab_size, tp, r);
  const IndexRange fc = shard_range(4 * C, tp, r);
  const int64_t hs = C / cfg.n_head, q0 = heads.lo * hs, q1 = heads.hi * hs;
  const std::vector<Shard::Piece> qkv = {{q0, q1}, {C + q0, C + q1}, {2 * C + q0, 2 * C + q1}};
  // Whole on every rank of a group: every rank but the first holds a replica.
  auto whole = [&](std::string name, Shape shape, Init init, float s = 0.0f) {
    const size_t i = P.add(std::move(name), shape, false, init, s);
    if (r > 0) P.mark_replica(i);
    return i;
  };
  PartIdx x;
  auto add_wte = [&] {
    x.wte = P.add("transformer.wte.weight", {cfg.vocab_size, C}, split(0, {{vocab.lo, vocab.hi}}), false,
                  Init::normal, std);
    if (!part.embedding) P.mark_replica(x.wte);
  };
  if ((part.embedding || part.head) && !part.embedding_rows) add_wte();
  if (part.embedding) x.wpe = whole("transformer.wpe.weight", {cfg.seq_len, C}, Init::normal, std);
  for (const BlockRange& range : part.chunks) {
    auto& chunk = x.chunks.emplace_back();
    for (int l = range.first; l < range.last && max_blocks > 0; ++l, --max_blocks) {
      std::string p = "transformer.h." + std::to_string(l) + ".";
      auto& i = chunk.emplace_back();
      i.ln1w = whole(p + "ln_1.weight", {C}, Init::ones);
      i.ln1b = whole(p + "ln_1.bias", {C}, Init::zeros);
      i.attw = P.add(p + "attn.c_attn.weight", {C, 3 * C}, split(1, qkv), true, Init::normal, std);
      i.attb = P.add(p + "attn.c_attn.bias", {3 * C}, split(0, qkv), false, Init::zeros);
      i.prjw = P.add(p + "attn.c_proj.weight", {C, C}, split(0, {{q0, q1}}), true, Init::normal, proj_std);
      i.prjb = whole(p + "attn.c_proj.bias", {C}, Init::zeros);
      i.ln2w = whole(p + "ln_2.weight", {C}, Init::ones);
      i.ln2b = whole(p + "ln_2.bias", {C}, Init::zeros);
      i.fcw = P.add(p + "mlp.c_fc.weight", {C, 4 * C}, split(1, {{fc.lo, fc.hi}}), true, Init::normal, std);
      i.fcb = P.add(p + "mlp.c_fc.bias", {4 * C}, split(0, {{fc.lo, fc.hi}}), false, Init::zeros);
      i.mpw = P.add(p + "mlp.c_proj.weight", {4 * C, C}, split(0, {{fc.lo, fc.hi}}), true, Init::normal,
                    proj_std);
      i.mpb = whole(p + "mlp.c_proj.bias", {C}, Init::zeros);
    }
  }
  if (part.head) {
    x.lnfw = whole("transformer.ln_f.weight", {C}, Init::ones);
    x.lnfb = whole("transformer.ln_f.bias", {C}, Init::zeros);
  }
  if (part.embedding_rows) add_wte();
  return x;
}

// Bytes an Arena hands out for n floats (64-byte alignment).
size_t arena_floats(size_t n) { return (n * sizeof(float) + 63) / 64 * 64; }

}  // namespace

Recompute recompute_policy(const std::string& name) {
  if (name == "selective") return Recompute::kSelective;
  if (name == "full") return Recompute::kFull;
  return Recompute::kNone;
}

std::vector<ParamSpec> GPT::param_specs(const GPTConfig& cfg, const GPTPart& part) {
  ParamRegistry P;
  register_params(cfg, part, P);
  return P.specs();
}

// O(1) in the layers: every block holds tensors of the same shapes, so the
// part is its other tensors and one block registered, plus the rest of its
// blocks at that block's size (each tensor starts 16-float aligned, so the
// padded sizes add up; the planner asks this for every layout it weighs,
// and registering 12,000 blocks' names each time took minutes).
size_t GPT::flat_params(const GPTConfig& cfg, const GPTPart& part) {
  ParamRegistry P;
  register_params(cfg, part, P, /*max_blocks=*/1);
  size_t total = 0, block = 0;
  for (const ParamSpec& s : P.specs()) {
    const size_t padded =
        (s.numel + 15) / 16 * 16;  // as add() aligns the next and allocate() pads the last
    total += padded;
    if (s.name.rfind("transformer.h.", 0) == 0) block += padded;
  }
  size_t blocks = 0;
  for (const BlockRange& r : part.chunks) blocks += size_t(r.last - r.first);
  return total + (blocks - 1) * block;  // check_part: at least one block
}

// Mirrors the arena allocations of bind(), forward() and backward() below and
// in the layers (block.cc, attention.cc, mlp.cc, layernorm.cc); the test
// (tests/nn/memory_estimate_test.cc) holds it to Arena::high_water().
size_t GPT::activation_bytes(const GPTConfig& cfg, const GPTPart& part, int chunk, int B, int T,
                             bool split_backward) {
  const size_t N = size_t(B) * T, C = size_t(cfg.n_embd), NC = N * C;
  // A tensor-parallel rank's share of the heads' and the MLP's widths and of
  // the vocabulary; sequence parallel, of the residual stream's rows too.
  const size_t tp = size_t(part.tp), NCh = NC / tp, NH = size_t(cfg.n_head) / tp, NF = 4 * NC / tp;
  const size_t Vl = size_t(shard_range(cfg.vocab_size, part.tp, part.tp_rank).size());
  const bool sp = tp > 1 && part.sequence_parallel;
  const size_t Nl = sp ? N / tp : N, NlC = Nl * C;
  const auto a = arena_floats;
  // bf16 (part.precision): the tensors GEMMs read are 2 bytes an element (nn/layers.h).
  const size_t e = dtype_size(part.precision);
  const bool bf = part.precision == DType::bf16;
  auto x = [&](size_t n) { return (n * e + 63) / 64 * 64; };
  const bool first = part.starts_model(chunk), last = part.ends_model(chunk);
  const BlockRange r = part.chunks.at(size_t(chunk));
  auto layernorm = [&] { return 2 * a(Nl); };  // mean, rstd
  const bool selective = part.recompute == Recompute::kSelective, full = part.recompute == Recompute::kFull;
  // What a block's forward allocates but its two outputs (r_mid, mlp_out):
  // r (the input's sum, from the second block of a chunk on), h, attn_out,
  // h2, the LayerNorms' statistics, qkv, lse, pre, and y and act unless
  // the selective policy drops them.
  auto internal = [&](int l) {
    size_t n = (l > r.first ? a(NlC) : 0) + a(NlC) + 2 * x(NlC) + 2 * layernorm();
    n += x(3 * NCh) + a(size_t(B) * NH * T) + x(NF);
    if (!selective) n += x(NCh) + x(NF);
    return n;
  };
  size_t fwd = first ? a(N) + a(NlC) : a(NlC);  // tokens and x, or the received input
  if (!last) fwd += a(NlC);                     // where the output's gradient is received
  size_t refwd = 0;  // full: the largest block forward that backward runs again
  // Every block of the chunk but its first also keeps r (internal(l) is the
  // same for all of them): O(1) in the blocks, not a loop over them.
  const size_t blocks = size_t(r.last - r.first), later = internal(r.first + 1);
  fwd += blocks * 2 * a(NlC) + (full ? 0 : internal(r.first) + (blocks - 1) * later);
  if (full) refwd = blocks > 1 ? later : internal(r.first);
  // What forward allocates and gives back before backward starts: a fused
  // head's chunk of logits and its loss's scratch.
  size_t transient = 0;
  const size_t scratch = tp > 1 ? a(3 * N) + a(3 * N * tp) : 0;  // the loss's exchange (nn/cross_entropy.cc)
  if (last) {  // targets, r_final, lnf_out (and its gathered rows); ln_f; losses
    fwd += a(N) + a(NlC) + x(NlC) + (sp ? x(NC) : 0) + layernorm() + a(N);
    if (part.head_chunk > 0) {  // dh of every row kept; one chunk's logits and scratch at a time
      const size_t rows = std::min<size_t>(size_t(part.head_chunk), N);
      fwd += a(NC);
      transient = x(rows * Vl) + (tp > 1 ? a(3 * rows) + a(3 * rows * tp) : 0);
    } else {  // the logits (then their gradient), and the loss's scratch
      fwd += x(N * Vl) + scratch;
    }
  } else {
    fwd += a(NlC);  // the output residual
  }
  // backward: the head's dr and dh for the whole pass, then one block's
  // scratch at a time (full: its forward again first; its dh and the larger
  // of the MLP's dact and attention's dy + dqkv, with act or y made again
  // under the selective policy; sequence parallel: with the gathered output
  // gradient, the input gathered again and the partial input gradient); a
  // kInput pass keeps every block's (nn/layers.h), sequence parallel with
  // one gathered tensor at a time on top. bf16: each of the two also holds
  // the output gradient's bf16 copy, and the MLP the bf16 dpre beside dact.
  // dr and dh (elsewhere dr is the received gradient; a fused head's dh is
  // forward's, gathered onto this rank's rows under sequence parallelism).
  size_t bwd = last ? (part.head_chunk > 0 && !sp ? a(NlC) : 2 * a(NlC)) : 0;
  const size_t sel_mlp = selective ? x(NF) : 0, sel_attn = selective ? x(NCh) : 0;
  // The output gradient as c_proj's backward reads it: gathered (f32) under
  // sequence parallelism, then its bf16 copy; else the bf16 copy, or the
  // copy a kInput pass keeps, or dout itself.
  const size_t dcopy = sp ? a(NC) + (bf ? x(NC) : 0) : (bf || split_backward ? x(NC) : 0);
  const size_t mlp = dcopy + a(NF) + (bf ? x(NF) : 0) + sel_mlp;
  const size_t attn = dcopy + a(NCh) + x(3 * NCh) + sel_attn;
  if (split_backward) {
    bwd += blocks * (a(NlC) + mlp + attn) + (full ? internal(r.first) + (blocks - 1) * later : 0);
    bwd += sp ? a(NC) : 0;  // the larger of the partial input gradient and the input gathered again
  } else {  // sequence parallel: the input gathered again and the partial input gradient on top
    bwd += refwd + a(NlC) + std::max(mlp, attn) + (sp ? x(NC) + a(NC) : 0);
  }
  return fwd + std::max(transient, bwd);
}

GPT::GPT(const GPTConfig& cfg, const GPTPart& part, TensorParallel* tp)
    : cfg_(cfg),
      part_(part),
      tp_(part.tp > 1 ? tp : nullptr),
      sequence_(part.tp > 1 && part.sequence_parallel),
      loss_(part.device) {
  CRUCIBLE_CHECK(part.tp == 1 || (tp && tp->size() == part.tp && tp->rank() == part.tp_rank),
                 "[nn] a tensor-parallel part needs its group's collectives");
  const int C = cfg.n_embd;
  const DType act = part.precision;
  auto& P = params_;
  PartIdx idx = register_params(cfg, part, P);
  P.allocate(act == DType::bf16, part.device);

  if (idx.wte != SIZE_MAX) embed_.wte = P.param(idx.wte);
  if (idx.wpe != SIZE_MAX) embed_.wpe = P.param(idx.wpe);
  embed_.V = cfg.vocab_size;
  embed_.C = C;
  embed_.vocab = shard_range(cfg.vocab_size, part.tp, part.tp_rank);
  embed_.tp = tp_;
  embed_.sequence = sequence_;
  // Each Linear's sizes are its (shard's) weight's: (in, out).
  auto linear = [&](size_t w, size_t b) {
    Linear lin;
    lin.w = P.param(w);
    lin.b = P.param(b);
    lin.in = int(P.specs()[w].shape[0]);
    lin.out = int(P.specs()[w].shape[1]);
    lin.act_type = act;
    return lin;
  };
  auto layernorm = [&](size_t w, size_t b) {
    LayerNorm ln;
    ln.w = P.param(w);
    ln.b = P.param(b);
    ln.C = C;
    ln.act_type = act;
    return ln;
  };
  for (const auto& chunk : idx.chunks) {
    auto& blocks = chunks_.emplace_back();
    for (const LayerIdx& i : chunk) {
      Block& bl = blocks.emplace_back();
      bl.C = C;
      bl.act_type = act;
      bl.attn.act_type = act;
      bl.mlp.act_type = act;
      bl.recompute = part.recompute == Recompute::kFull;
      bl.attn.recompute = bl.mlp.recompute = part.recompute == Recompute::kSelective;
      bl.ln_1 = layernorm(i.ln1w, i.ln1b);
      bl.ln_2 = layernorm(i.ln2w, i.ln2b);
      bl.attn.c_attn = linear(i.attw, i.attb);
      bl.attn.c_proj = linear(i.prjw, i.prjb);
      bl.attn.C = C;
      bl.attn.NH = cfg.n_head / part.tp;
      bl.attn.tp = {tp_, sequence_, C};
      bl.mlp.c_fc = linear(i.fcw, i.fcb);
      bl.mlp.c_proj = linear(i.mpw, i.mpb);
      bl.mlp.C = C;
      bl.mlp.tp = {tp_, sequence_, C};
      bl.shards = sequence_ ? part.tp : 1;
    }
  }
  if (part.head) ln_f_ = layernorm(idx.lnfw, idx.lnfb);
}

int fused_head_rows(const GPTConfig& cfg, const GPTPart& part) {
  const int64_t vocab = shard_range(cfg.vocab_size, part.tp, part.tp_rank).size();
  const int64_t rows = (int64_t(32) << 20) / (4 * std::max<int64_t>(1, vocab));
  return int(std::max<int64_t>(16, rows / 16 * 16));
}

void GPT::bind(Activations& a, Arena& arena, int chunk, int B, int T) const {
  CRUCIBLE_CHECK(chunk >= 0 && chunk < part_.num_chunks(), "[nn] chunk index in range");
  CRUCIBLE_CHECK(T >= 1 && T <= cfg_.seq_len, "[nn] sequence longer than model.seq_len");
  CRUCIBLE_CHECK(a.state_ == Activations::State::kDone, "[nn] Activations rebound before its backward");
  a.arena_ = &arena;
  a.chunk_ = chunk;
  a.B_ = B;
  a.T_ = T;
  a.embed_ = embed_;
  a.blocks_ = chunks_[size_t(chunk)];  // this micro-batch's copies (they carry its saved state)
  a.ln_f_ = ln_f_;
  a.input_ = part_.starts_model(chunk) ? nullptr : arena.allocate_array<float>(boundary_floats(B, T));
  a.output_grad_ = part_.ends_model(chunk) ? nullptr : arena.allocate_array<float>(boundary_floats(B, T));
  a.output_ = a.losses_ = a.dr_ = nullptr;
  a.lnf_out_ = a.logits_ = nullptr;
  a.head_dh_ = nullptr;
  a.logits_type_ = DType::f32;
  a.input_grad_ = nullptr;
  a.tokens_ = nullptr;
  a.have_grad_ = false;
  a.state_ = Activations::State::kBound;
}

void GPT::forward(Activations& a, const int32_t* tokens, const int32_t* targets,
                  float grad_scale) const {
  CRUCIBLE_CHECK(a.state_ == Activations::State::kBound, "[nn] forward of an unbound Activations");
  Arena& arena = *a.arena_;
  const int B = a.B_, T = a.T_, N = B * T;
  const size_t NC = boundary_floats(B, T);  // the residual stream's (this rank's rows, sequence parallel)
  const float* ra = a.input_;
  const float* rb = nullptr;
  if (part_.starts_model(a.chunk_)) {
    CRUCIBLE_CHECK(tokens, "[nn] the first chunk's forward needs tokens");
    int32_t* toks = arena.allocate_array<int32_t>(size_t(N));
    kernels::copy_bytes(toks, tokens, size_t(N) * sizeof(int32_t));
    a.tokens_ = toks;
    float* x = arena.allocate_array<float>(NC);
    a.embed_.forward(arena, x, toks, B, T);
    ra = x;
  }
  float* oa = nullptr;
  float* ob = nullptr;
  for (Block& bl : a.blocks_) {
    bl.forward(arena, ra, rb, &oa, &ob, B, T);
    ra = oa, rb = ob;
  }
  a.state_ = Activations::State::kForward;
  if (!part_.ends_model(a.chunk_)) {
    a.output_ = arena.allocate_array<float>(NC);
    kernels::add(a.output_, ra, rb, NC);
    a.have_grad_ = true;
    return;
  }
  head_forward(a, ra, rb, targets, grad_scale);
}

// ln_f over the last block's output (ra + rb), the tied LM head and the loss.
void GPT::head_forward(Activations& a, const float* ra, const float* rb, const int32_t* targets,
                       float grad_scale) const {
  Arena& arena = *a.arena_;
  const int C = cfg_.n_embd, V = int(embed_.vocab.size()), N = a.B_ * a.T_;
  const size_t NC = boundary_floats(a.B_, a.T_);  // this rank's rows of it, sequence parallel
  const int rows = int(NC / size_t(C));
  int32_t* tgts = nullptr;
  if (targets) {
    tgts = arena.allocate_array<int32_t>(size_t(N));
    kernels::copy_bytes(tgts, targets, size_t(N) * sizeof(int32_t));
  }
  const DType act = part_.precision;
  float* r_final = arena.allocate_array<float>(NC);
  a.lnf_out_ = arena_act(arena, NC, act);
  a.ln_f_.forward(arena, a.lnf_out_, r_final, ra, rb, rows);
  if (sequence_)  // the head reads every row
    a.lnf_out_ = const_cast<void*>(gather_rows(arena, *tp_, a.lnf_out_, NC, act));
  const void* wte = gemm_weights(a.embed_.wte, act);
  const float dscale = grad_scale / float(N);
  // losses (n) of n rows' logits (n,V); with dscale != 0 the logits become their gradient.
  auto loss_of = [&](float* losses, void* logits, const int32_t* t, int n) {
    if (tp_)
      vocab_parallel_cross_entropy(arena, *tp_, embed_.vocab, losses, logits, act, t, n, dscale);
    else if (act == DType::bf16)
      kernels::softmax_cross_entropy_bf16(losses, static_cast<bf16*>(logits), t, n, V, dscale);
    else
      kernels::softmax_cross_entropy(losses, static_cast<float*>(logits), t, n, V, dscale);
  };
  a.have_grad_ = targets && grad_scale != 0.0f;
  if (targets && part_.head_chunk > 0) {
    // Fused head and loss: the logits of head_chunk rows at a time, each
    // chunk's loss and (training) gradient formed at once, so the (N,V)
    // logits never exist. What backward needs of them is made here: dh
    // (N,C) = dlogits @ wte, kept, and dwte (V,C) += dlogits^T @ lnf_out
    // (dwte read and written once per chunk).
    a.losses_ = arena.allocate_array<float>(size_t(N));
    a.head_dh_ = a.have_grad_ ? arena.allocate_array<float>(size_t(N) * C) : nullptr;
    const int rows = std::min(part_.head_chunk, N);
    const size_t row_bytes = size_t(C) * dtype_size(act);
    Arena::Mark m = arena.mark();
    void* logits = arena_act(arena, size_t(rows) * V, act);
    for (int r0 = 0; r0 < N; r0 += rows) {
      const int n = std::min(rows, N - r0);
      const void* h = static_cast<const char*>(a.lnf_out_) + size_t(r0) * row_bytes;
      kernels::gemm(act, act, false, true, n, V, C, h, C, wte, C, logits, V, false);
      Arena::Mark scratch = arena.mark();
      loss_of(a.losses_ + r0, logits, tgts + r0, n);
      arena.rewind(scratch);
      if (!a.have_grad_) continue;
      kernels::gemm(act, DType::f32, false, false, n, C, V, logits, V, wte, C, a.head_dh_ + size_t(r0) * C, C, false);
      kernels::gemm(act, DType::f32, true, false, V, C, n, logits, V, h, C, a.embed_.wte.grad, C, true);
    }
    arena.rewind(m);
  } else {
    // Tied LM head: logits (N,V) = lnf_out (N,C) @ wte^T (V: this rank's
    // vocabulary rows). bf16 keeps the logits of a training forward in bf16
    // (their gradient replaces them, for the backward GEMMs); logits asked
    // for without targets come out f32.
    a.logits_type_ = targets ? act : DType::f32;
    a.logits_ = arena_act(arena, size_t(N) * V, a.logits_type_);
    kernels::gemm(act, a.logits_type_, false, true, N, V, C, a.lnf_out_, C, wte, C, a.logits_, V, false);
    if (!targets) return;
    a.losses_ = arena.allocate_array<float>(size_t(N));
    loss_of(a.losses_, a.logits_, tgts, N);
  }
}

void GPT::add_loss(const Activations& a, double* sum) const {
  CRUCIBLE_CHECK(a.losses_ && a.state_ != Activations::State::kBound, "[nn] a loss without a forward with targets");
  kernels::add_mean(sum, a.losses_, size_t(a.B_) * size_t(a.T_));
}

float GPT::loss(const Activations& a) const {
  loss_.write(kernels::StepScalars{});  // loss_sum = 0
  add_loss(a, &loss_.get()->loss_sum);
  return float(loss_.read().loss_sum);
}

void GPT::backward(Activations& a, const float* dout, BackwardPass pass, const GradsReady& grads_ready,
                   bool finalises) const {
  using S = Activations::State;
  const bool weight_pass = pass == BackwardPass::kWeight;
  CRUCIBLE_CHECK(a.state_ == (weight_pass ? S::kInputDone : S::kForward) && a.have_grad_,
                 "[nn] backward pass out of order, or without a training forward (grad_scale != 0)");
  Arena& arena = *a.arena_;
  const int C = cfg_.n_embd, V = int(embed_.vocab.size()), B = a.B_, T = a.T_, N = B * T;
  const size_t NC = boundary_floats(B, T);  // the residual stream's (this rank's rows, sequence parallel)
  const int rows = int(NC / size_t(C));
  const bool first = part_.starts_model(a.chunk_), last = part_.ends_model(a.chunk_);
  const bool weights = pass != BackwardPass::kInput;  // this pass forms weight gradients
  const DType act = part_.precision, f32 = DType::f32;
  const void* wte = last ? gemm_weights(a.embed_.wte, act) : nullptr;
  // Sequence parallel: each rank's LayerNorm gradients are its rows' share,
  // summed over the group once they are complete (the finalising backward).
  auto sum_layernorm = [&](const LayerNorm& ln) {
    if (!sequence_ || !finalises || !weights) return;
    tp_->allreduce(ln.w.grad, size_t(C));
    tp_->allreduce(ln.b.grad, size_t(C));
  };
  // Parameters are laid out in forward order, so backward finalises the flat
  // gradient buffer from its end towards offset 0 (wte last).
  auto ready_from = [&](const float* grad) {
    if (grads_ready && weights) grads_ready(size_t(grad - params_.grads()));
  };
  if (!weight_pass) {
    if (last) {
      a.dr_ = arena.allocate_array<float>(NC);
      // LM head: dlnf (N,C) = dlogits (N,V) @ wte (V,C); ln_f's backward
      // starts dr. A fused head formed it (and dwte) in forward.
      const bool fused = a.head_dh_ != nullptr;
      float* dh = fused && !sequence_ ? a.head_dh_ : arena.allocate_array<float>(NC);
      Arena::Mark m = arena.mark();
      float* dh_all = fused ? a.head_dh_ : sequence_ ? arena.allocate_array<float>(size_t(N) * C) : dh;
      if (!fused) kernels::gemm(act, f32, false, false, N, C, V, a.logits_, V, wte, C, dh_all, C, false);
      // Each rank's dh is its vocabulary rows' share (sequence parallel: summed onto its rows).
      if (sequence_)
        tp_->reduce_scatter(dh, dh_all, NC);
      else if (tp_)
        tp_->allreduce(dh, NC);
      arena.rewind(m);
      if (weights && !fused)  // dwte (V,C) += dlogits^T @ lnf_out
        kernels::gemm(act, f32, true, false, V, C, N, a.logits_, V, a.lnf_out_, C, a.embed_.wte.grad, C, true);
      kernels::fill(a.dr_, NC, 0.0f);
      a.ln_f_.backward(a.dr_, dh, rows);
    } else {
      a.dr_ = a.output_grad_;  // the running gradient starts as the received one, in place
      if (dout && dout != a.dr_) kernels::copy_bytes(a.dr_, dout, NC * sizeof(float));
    }
  } else if (last && !a.head_dh_) {
    kernels::gemm(act, f32, true, false, V, C, N, a.logits_, V, a.lnf_out_, C, a.embed_.wte.grad, C, true);
  }
  if (last) {
    sum_layernorm(a.ln_f_);
    ready_from(a.ln_f_.w.grad);
  }
  for (int l = int(a.blocks_.size()) - 1; l >= 0; --l) {
    Block& bl = a.blocks_[size_t(l)];
    bl.backward(arena, a.dr_, B, T, pass);
    sum_layernorm(bl.ln_2);
    sum_layernorm(bl.ln_1);
    ready_from(bl.ln_1.w.grad);
  }
  if (first && weights) a.embed_.backward(arena, a.dr_, B, T);
  a.input_grad_ = first ? nullptr : a.dr_;
  if (a.chunk_ == 0) ready_from(params_.grads());
  a.state_ = pass == BackwardPass::kInput ? S::kInputDone : S::kDone;
}

const float* Activations::logits() const {
  CRUCIBLE_CHECK(logits_type_ == DType::f32, "[nn] f32 logits are those of a forward without targets");
  return static_cast<const float*>(logits_);
}

float GPT::forward(Arena& arena, const int32_t* tokens, const int32_t* targets, int B, int T,
                   float grad_scale) {
  CRUCIBLE_CHECK(part_.num_chunks() == 1 && part_.embedding && part_.head,
                 "[nn] a whole-model forward on a part of the model");
  last_.state_ = Activations::State::kDone;  // a forward without backward may have gone before
  bind(last_, arena, 0, B, T);
  forward(last_, tokens, targets, grad_scale);
  return targets ? loss(last_) : 0.0f;
}

void GPT::backward(Arena&, const GradsReady& grads_ready) {
  CRUCIBLE_CHECK(last_.state_ == Activations::State::kForward && last_.have_grad_,
                 "[nn] backward() without a training forward (grad_scale != 0)");
  backward(last_, nullptr, BackwardPass::kAll, grads_ready);
}

}  // namespace crucible::nn
