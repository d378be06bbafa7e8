// Generator: incremental GPT inference for one sequence, with a KV cache.
//
// Caches the keys and values of every layer, (L, seq_len, C) each, so each new
// token costs one row through every matmul plus O(position) attention instead
// of a full forward over the sequence. A prompt of n tokens runs as one
// batched pass (n rows, causal attention over the cache). The cache and all
// scratch rows are allocated once, from crucible's allocator, in the
// constructor: appending allocates nothing. The arithmetic mirrors
// GPT::forward (same fused LayerNorm+residual and bias+GELU kernels, same GEMM
// layout), so its logits match the training forward's to float rounding.
//
// In the model's precision: a bf16 model's generator runs every GEMM on bf16
// operands (the weights' bf16 copy, each GEMM input rounded) with f32
// accumulation, as its training forward does; the rest stays f32.
//
// Reads the weights of a GPT it does not own (which must outlive it and not
// be resized; updated weights are picked up by the next append, but tokens
// already in the cache keep the old keys and values: reset() after a weight
// change). Not thread-safe: one Generator per thread, any number per model.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "nn/gpt.h"
#include "nn/sampler.h"

namespace crucible::nn {

class Generator {
 public:
  explicit Generator(const GPT& model);

  void reset();                          // forget the sequence
  int position() const { return pos_; }  // tokens consumed so far
  int capacity() const { return cfg_.seq_len; }
  int vocab_size() const { return cfg_.vocab_size; }

  // Appends n >= 1 tokens (ids in [0, V)) at positions position() ..
  // position()+n-1. Returns the logits (V) after the last of them, valid until
  // the next append() or reset(). Appending beyond capacity() is a
  // CRUCIBLE_CHECK failure: the caller slides the window (see generate()).
  const float* append(const int32_t* tokens, int n);

 private:
  struct LayerWeights {
    const float *ln1w, *ln1b, *attw, *attb, *prjw, *prjb;
    const float *ln2w, *ln2b, *fcw, *fcb, *mpw, *mpb;
    const bf16 *attw16 = nullptr, *prjw16 = nullptr, *fcw16 = nullptr, *mpw16 = nullptr;  // bf16 models
  };
  // y (n,N) = x (n,K) @ W (K,N) (trans: W^T of (N,K)) + bias, in the model's precision.
  void matmul(float* y, const float* x, const float* w, const bf16* w16, int n, int N, int K,
              const float* bias, bool trans = false);
  // y (n,C) = causal attention of the n query rows in qkv (n,3C) at positions
  // pos_ .. pos_+n-1 over the cached keys/values (0 .. pos_+n-1) of layer l.
  void attend(float* y, const float* qkv, int l, int n);

  GPTConfig cfg_;
  bool bf16_ = false;
  const float* wte_ = nullptr;  // (V,C)
  const bf16* wte16_ = nullptr;
  const float* wpe_ = nullptr;  // (seq_len,C)
  const float *lnfw_ = nullptr, *lnfb_ = nullptr;
  std::vector<LayerWeights> layers_;
  int pos_ = 0;

  Tensor k_cache_, v_cache_;  // (L, seq_len, C) each
  // Scratch for up to seq_len rows (a whole prompt at once).
  Tensor resid_a_, resid_b_;  // (T,C) residual stream, ping-pong
  Tensor h_, branch_;         // (T,C) LayerNorm output; attention / MLP output
  Tensor qkv_;                // (T,3C)
  Tensor att_;                // (T,C) attention output before c_proj
  Tensor fc_pre_, fc_act_;    // (T,4C)
  Tensor mean_, rstd_;        // (T)
  Tensor logits_;             // (V)
  Tensor x16_;                // (T,4C) bf16: a GEMM's input, rounded (bf16 models)
};

// Generates n_new tokens after `prompt` (if empty, starts from bos_token),
// calling on_token(id) as each is drawn (streaming). Resets `gen` first. When
// the context is full it re-primes the cache with the last capacity()/2 tokens
// (a sliding window; positions restart at 0) and continues; a prompt longer
// than capacity() is cut to its last capacity() tokens. Returns the new ids;
// fewer when `stop` (asked after each token) says so.
std::vector<int32_t> generate(Generator& gen, const std::vector<int32_t>& prompt, int n_new,
                              int32_t bos_token, const SamplingConfig& cfg, Rng& rng,
                              const std::function<void(int32_t)>& on_token = {},
                              const std::function<bool()>& stop = {});

}  // namespace crucible::nn
