// The GPT-2 layers, each with forward and backward side by side (llm.c style).
//
// A layer holds Param views into the model's flat parameter/gradient buffers
// and, during a step, pointers to what its forward saved for backward; those
// live in the step arena and are valid until the arena's next reset().
// Backward reads as forward in reverse. Parameter gradients accumulate (+=),
// so gradient accumulation over micro-batches is just calling backward again.
// Shapes: N = B*T rows, C channels. Not thread-safe (kernels parallelise inside).
//
// A layer value is its parameter views plus what its last forward saved, so
// a copy of a layer is the same layer for another micro-batch: a pipeline
// keeps several micro-batches in flight by giving each its own copies
// (nn/gpt.h, Activations).
//
// Backward can run in two passes (the zero-bubble pipeline schedules):
// kInput computes only the input gradient, the one the previous stage waits
// for, and keeps in the arena what the weight gradients need (each Linear's
// output gradient; LayerNorm and the GELU bias gradients are done here, they
// ride on the input-gradient kernels); kWeight then forms the matmul weight
// and bias gradients from it. kAll is both, in the order of one pass.
//
// Precision: the activations that GEMMs read (the LayerNorms' outputs, qkv,
// the attention output, the MLP's pre-activation and GELU output, the
// logits, and the output gradients handed to a GEMM) have the model's
// activation type act_type, f32 or bf16 (train.precision), so they are
// void* with that type beside them; bf16 GEMMs read the weights' bf16 copy
// (Param::value16) and accumulate in f32. The residual stream, statistics
// and the gradients that leave a GEMM stay f32 (docs/architecture.md, bf16).
#pragma once
#include <cstdint>

#include "core/allocator.h"
#include "nn/params.h"
#include "nn/tensor_parallel.h"

namespace crucible::nn {

enum class BackwardPass { kAll, kInput, kWeight };

// What backward recomputes instead of keeping from forward (train.recompute):
// kSelective the attention core and the GELU (Korthikanti et al. 2022: their
// outputs are the largest tensors and the cheapest to redo), kFull each
// block from its input. Recomputed tensors are the forward's bit for bit
// (the kernels are deterministic), so losses and gradients do not change.
enum class Recompute { kNone, kSelective, kFull };

// The weights as a GEMM of type t reads them: the f32 values or their bf16 copy.
const void* gemm_weights(const Param& p, DType t);
// n elements of type t from the arena.
void* arena_act(Arena& arena, size_t n, DType t);
// A copy of x (n floats) in the arena as type t: what a kInput pass keeps of
// a gradient that its caller goes on changing, and (bf16) what a GEMM reads.
const void* arena_copy(Arena& arena, const float* x, size_t n, DType t = DType::f32);

// Sequence parallelism's gather: the (rows*size, C) tensor of every rank's
// (rows, C), in the arena.
float* gather_rows(Arena& arena, TensorParallel& tp, const float* rows, size_t n);
// The same for n elements of type t.
const void* gather_rows(Arena& arena, TensorParallel& tp, const void* rows, size_t n, DType t);

// out (B,T,C) = wte[tokens] + wpe[t]. Vocab-parallel (tp set): wte holds
// rows [vocab.lo, vocab.hi) only; each rank looks up the tokens it holds
// (zero rows elsewhere), the group sums the lookups, then wpe is added.
// Sequence-parallel (sequence set): out holds this rank's rows only
// (nn/tensor_parallel.h); the lookups are reduce-scattered instead.
//
// rows set (GPTPart::embedding_rows): backward leaves wte.grad alone and
// appends each position's gradient row and token to *rows instead, for the
// data-parallel layer to add after the head's dense wte gradient is reduced
// (parallel/embedding_rows.h).
struct EmbeddingRows {
  int32_t* tokens = nullptr;  // (capacity) whole-vocabulary ids
  float* rows = nullptr;      // (capacity, C)
  size_t capacity = 0, count = 0;
};

struct Embedding {
  Param wte, wpe;  // (V,C) or (vocab.size(),C), (maxT,C)
  int V = 0, C = 0;
  IndexRange vocab;  // the rows of wte held
  TensorParallel* tp = nullptr;
  bool sequence = false;
  EmbeddingRows* rows = nullptr;
  const int32_t* tokens = nullptr;
  // scratch from the arena (sequence parallel: the (B,T,C) lookups).
  void forward(Arena& arena, float* out, const int32_t* tokens, int B, int T);
  void backward(Arena& arena, const float* dout, int B, int T);
};

// out (N,C) = LayerNorm(a + b) ; when b is given, the residual sum is
// written to resid (N,C) and is this layer's saved input.
// out is of type act_type.
struct LayerNorm {
  Param w, b;  // (C), (C)
  int C = 0;
  DType act_type = DType::f32;
  const float* x = nullptr;  // saved input (N,C)
  float* mean = nullptr;     // (N)
  float* rstd = nullptr;     // (N)
  void forward(Arena& arena, void* out, float* resid, const float* a, const float* b, int N);
  // dx (N,C) += ; accumulating is the residual fusion.
  void backward(float* dx, const float* dout, int N);
};

// y (N,out) = x (N,in) @ W (in,out) + bias (Conv1D layout, as Hugging Face GPT-2).
// x and dy are of type act_type; dx and the gradients f32.
struct Linear {
  Param w, b;
  int in = 0, out = 0;
  DType act_type = DType::f32;
  const void* x = nullptr;   // saved input (N,in)
  const void* dy = nullptr;  // output gradient (N,out) kept by a kInput pass for kWeight
  // y of type y_type. with_bias=false leaves the bias to a fused consumer (bias+GELU).
  void forward(void* y, DType y_type, const void* x, int N, bool with_bias = true);
  // bf16, on a device whose GEMM fuses the GELU (kernels::gemm_gelu_fuses):
  // pre (N,out) = x W + bias and act = gelu(pre), both of one pass.
  void forward_gelu(void* pre, void* act, const void* x, int N);
  // dx (N,in) = dy W^T (overwrites; may be null), dW += x^T dy, db += colsum(dy).
  // kInput: dx only (dy must stay valid for kWeight); kWeight: dW, db from the
  // kept dy (the arguments dx and dy are unused).
  void backward(float* dx, const void* dy, int N, bool with_bias = true,
                BackwardPass pass = BackwardPass::kAll);
  // bf16, the MLP's second GEMM on a device that fuses its input gradient
  // with the GELU's (kernels::gemm_dgelu_bf16): backward(dx, ...) where dx is
  // never stored but taken through the GELU at pre: dpre (N,in) =
  // dx * gelu'(pre) and dbias (in) its column sums (written). kAll or kInput.
  // False, having done nothing, where the device does not fuse the problem.
  bool backward_dgelu(bf16* dpre, float* dbias, const void* dy, const bf16* pre, int N, BackwardPass pass);
};

// The tensor-parallel ends of a column-parallel / row-parallel pair of
// linears (Megatron's f and g; nn/tensor_parallel.h), one mechanism for
// attention and the MLP. tp null: plain linears, nothing exchanged. N rows
// of the (B,T) tokens; under sequence parallelism the pair's input and
// output are this rank's N/tp rows of C.
// x, y and dy are of the linears' act_type.
struct TensorParallelPair {
  TensorParallel* tp = nullptr;
  bool sequence = false;
  int C = 0;                     // the width of the pair's input and output
  const void* x_rows = nullptr;  // sequence parallel: the input rows, gathered again in backward
  // y = first(x), x (rows, C); sequence parallel gathers the rows for the GEMM only.
  void first_forward(Arena& arena, Linear& first, void* y, const void* x, int N, bool with_bias);
  // out (rows, C) = the group's sum of last(x), the bias once (the first rank adds it).
  void last_forward(Arena& arena, Linear& last, float* out, const void* x, int N);
  // The output gradient as last's backward reads it: every rank's rows
  // gathered, or a copy a kInput pass keeps (the caller goes on changing
  // dout), or its bf16 copy.
  const void* output_grad(Arena& arena, const Linear& last, const float* dout, int N, bool keep);
  // dx (rows, C) = the group's sum of first's input gradient from dy; kAll
  // also forms first's weight gradients; kWeight forms only those (dx, dy unused).
  void first_backward(Arena& arena, Linear& first, float* dx, const void* dy, int N, bool with_bias,
                      BackwardPass pass);
};

// qkv = c_attn(x); y = attention(qkv); out = c_proj(y). Tensor-parallel
// (tp set): this rank's NH heads of hs channels, Ch = NH hs = c_proj.in;
// c_attn column-parallel, c_proj row-parallel (nn/tensor_parallel.h).
// Sequence-parallel (sequence set): x and out are this rank's B*T/tp rows;
// x is gathered to (B,T,C) before c_attn and again in backward.
struct CausalSelfAttention {
  Linear c_attn, c_proj;
  int C = 0, NH = 0;  // the model's width; the heads held
  TensorParallelPair tp;  // c_attn, c_proj
  DType act_type = DType::f32;  // of x, qkv, y
  bool recompute = false;  // y is not kept: backward runs the attention core again
  void* qkv = nullptr;   // (B,T,3Ch)
  void* y = nullptr;     // (B,T,Ch)
  float* lse = nullptr;  // (B,NH,T)
  void forward(Arena& arena, float* out, const void* x, int B, int T);
  void core(Arena& arena, int B, int T);  // y = attention(qkv), into the arena
  // dx (B,T,C) = ... (overwrites); scratch from the arena (kept after a kInput pass).
  void backward(Arena& arena, float* dx, const float* dout, int B, int T,
                BackwardPass pass = BackwardPass::kAll);
};

// out = c_proj(gelu(c_fc(x))); H = c_fc.out = 4C, or 4C/tp columns of it
// tensor-parallel (c_fc column-parallel, c_proj row-parallel).
struct MLP {
  Linear c_fc, c_proj;
  int C = 0;
  TensorParallelPair tp;  // c_fc, c_proj
  DType act_type = DType::f32;  // of x, pre, act
  bool recompute = false;  // act is not kept: backward runs the GELU again
  void* pre = nullptr;  // (N,H) pre-activation
  void* act = nullptr;  // (N,H)
  void forward(Arena& arena, float* out, const void* x, int N);
  void gelu(Arena& arena, int N, const float* bias);  // act = gelu(pre + bias), into the arena
  void backward(Arena& arena, float* dx, const float* dout, int N,
                BackwardPass pass = BackwardPass::kAll);
};

// Pre-LN transformer block. The residual adds are fused into the LayerNorms:
//   r_mid = r + attn(ln_1(r)) is formed by ln_2's forward, and
//   r_next = r_mid + mlp(ln_2(r_mid)) is left to the caller (the next block's
//   ln_1 or the final ln_f), which receives (r_mid, mlp_out) as (a, b).
//
// Sequence parallel: the residual stream and LayerNorms hold B*T/shards rows.
struct Block {
  LayerNorm ln_1, ln_2;
  CausalSelfAttention attn;
  MLP mlp;
  int C = 0;
  DType act_type = DType::f32;  // of the LayerNorms' outputs
  int shards = 1;  // sequence parallel: tp (the rows of B*T each rank holds: 1/shards)
  // Recompute::kFull: forward keeps only its outputs and its input's
  // pointers; backward runs forward again first (the selective policy lives
  // in attn and mlp).
  bool recompute = false;
  const float* in_a = nullptr;  // the input residual r_a + r_b, as forward got it
  const float* in_b = nullptr;
  float* r_mid = nullptr;  // (N,C)
  float* mlp_out = nullptr;  // (N,C)
  // r_a + r_b is this block's input residual (r_b may be null).
  // On return: *out_a = r_mid, *out_b = mlp output, to be summed by the caller.
  void forward(Arena& arena, const float* r_a, const float* r_b, float** out_a, float** out_b,
               int B, int T);
 private:
  // forward's work into r_mid and mlp_out (allocated): every saved tensor from the arena.
  void run_forward(Arena& arena, const float* r_a, const float* r_b, int B, int T);
 public:
  // dr (N,C): on entry the gradient w.r.t. r_next; on exit w.r.t. this block's
  // input (a kWeight pass leaves it alone).
  void backward(Arena& arena, float* dr, int B, int T, BackwardPass pass = BackwardPass::kAll);
};

}  // namespace crucible::nn
