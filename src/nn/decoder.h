// Decoder: incremental GPT inference for several sequences at once, over a
// paged KV cache. The one inference forward of crucible: nn::Generator runs
// it for one sequence over a single contiguous block, `crucible serve` for a
// continuously changing batch over a pool of fixed-size blocks (serve/kv_pool.h).
//
// A call appends rows to any number of sequences: sequence s brings n_s new
// tokens at positions pos_s .. pos_s+n_s-1 (a whole prompt, a chunk of one,
// or the one token a decode step adds). All rows of all sequences go through
// each GEMM together; attention runs per (row, head) over that row's own
// sequence in the cache. Every kernel computes a row from that row alone
// (LayerNorm, GELU, attention) and each GEMM reduces each output row in an
// order that does not depend on the other rows (kernels::gemm_rows_invariant;
// tests/nn/decoder_test.cc holds it to that, bitwise): a sequence's logits
// are the same whatever it is batched with, so continuous batching changes
// no result.
//
// The KV cache is storage the caller owns: blocks of block_tokens positions,
// each holding every layer's keys and values, (n_blocks, L, 2, block_tokens, C)
// f32. A sequence's block table maps position p to block blocks[p / block_tokens].
//
// In the model's precision: a bf16 model runs every GEMM on bf16 operands
// (the weights' bf16 copy, each GEMM input rounded) with f32 accumulation, as
// its training forward does; the rest, the cache included, stays f32. The
// arithmetic mirrors GPT::forward (same fused LayerNorm+residual and bias+GELU
// kernels, same GEMM layout), so logits match the training forward's to float
// rounding.
//
// All scratch is allocated in the constructor, for up to max_rows rows and
// max_seqs sequences a call: forward() allocates nothing. Reads the weights of
// a GPT it does not own (which must outlive it). Not thread-safe: one Decoder
// per thread, any number per model.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/gemm.h"
#include "nn/gpt.h"

namespace crucible::nn {

// The caller's KV storage (see above).
struct KvView {
  float* base = nullptr;
  int block_tokens = 0;
};

// One sequence's part of a forward() call.
struct DecodeSeq {
  const int32_t* tokens = nullptr;  // (n) ids in [0, V)
  int n = 0;                        // rows to append, >= 1
  int pos = 0;                      // position of tokens[0]; the cache holds 0 .. pos-1
  const int32_t* blocks = nullptr;  // block table covering positions 0 .. pos+n-1
  bool logits = true;               // return the logits after its last row
};

class Decoder {
 public:
  // pack_weights: the model's weights stay fixed while the Decoder is used
  // (serving, `crucible generate`): each GEMM's weights are packed once into
  // oneDNN's layout (kernels::PackedWeights), a second copy of them. Without
  // it the Decoder reads the model's current weights at every call.
  Decoder(const GPT& model, int max_rows, int max_seqs, bool pack_weights = false);

  // Creates every GEMM primitive forward() can use (a server calls it at
  // start-up, so that no request pays for one).
  void warm_up();
  // Floats one block of block_tokens positions takes: L * 2 * block_tokens * C.
  size_t block_floats(int block_tokens) const;
  int max_rows() const { return max_rows_; }
  int max_seqs() const { return max_seqs_; }
  const GPTConfig& config() const { return cfg_; }

  // Appends seqs[0..n_seqs) (their rows summed <= max_rows, n_seqs <= max_seqs,
  // every pos+n <= model.seq_len: CRUCIBLE_CHECK failures otherwise) and
  // returns the logits (k, V) of the k sequences that asked for them, in their
  // order; valid until the next forward().
  const float* forward(const DecodeSeq* seqs, int n_seqs, const KvView& kv);

 private:
  // A GEMM's weights: (K,N), or (N,K) used transposed (the tied LM head).
  struct Matrix {
    const float* f32 = nullptr;
    const bf16* b16 = nullptr;         // the bf16 copy (bf16 models)
    kernels::PackedWeights packed;     // in the model's precision (pack_weights)
    int N = 0, K = 0;
    bool trans = false;
  };
  struct LayerWeights {
    const float *ln1w, *ln1b, *attb, *prjb, *ln2w, *ln2b, *fcb, *mpb;
    Matrix att, prj, fc, mp;
  };
  // y (n,N) = x (n,K) @ W + bias, in the model's precision.
  void matmul(float* y, const float* x, const Matrix& w, int n, const float* bias);
  // Writes the rows' keys and values (from qkv (R,3C)) into layer l's cache,
  // then y (R,C) = causal attention of each row over its sequence's keys.
  void attend(float* y, const float* qkv, int l, int R, const KvView& kv);

  GPTConfig cfg_;
  bool bf16_ = false;
  int max_rows_, max_seqs_;
  const float* wte_ = nullptr;  // (V,C)
  Matrix head_;                 // wte as the LM head
  const float* wpe_ = nullptr;  // (seq_len,C)
  const float *lnfw_ = nullptr, *lnfb_ = nullptr;
  std::vector<LayerWeights> layers_;

  // Per call: row r belongs to sequence row_seq_[r] at position row_pos_[r].
  std::vector<int32_t> row_seq_, row_pos_;
  std::vector<const int32_t*> seq_blocks_, row_tables_;  // per sequence; per row
  Tensor resid_a_, resid_b_;  // (R,C) residual stream, ping-pong
  Tensor h_, branch_;         // (R,C) LayerNorm output; attention / MLP output
  Tensor qkv_;                // (R,3C)
  Tensor att_;                // (R,C) attention output before c_proj
  Tensor fc_pre_, fc_act_;    // (R,4C)
  Tensor mean_, rstd_;        // (R)
  Tensor logits_;             // (max_seqs,V)
  Tensor x16_;                // (R,4C) bf16: a GEMM's input, rounded (bf16 models)
};

}  // namespace crucible::nn
