// Generator: incremental GPT inference for one sequence, with a KV cache.
//
// nn::Decoder (nn/decoder.h) for one sequence over one contiguous block of
// model.seq_len positions, (L, 2, seq_len, C): each new token costs one row
// through every matmul plus O(position) attention instead of a full forward
// over the sequence; a prompt of n tokens runs as one batched pass. The cache
// and all scratch are allocated once, in the constructor: appending allocates
// nothing. Its logits are bitwise those `crucible serve` computes for the same
// sequence in any batch (the same Decoder).
//
// Reads the weights of a GPT it does not own (which must outlive it and not
// be resized; unless constant_weights, updated weights are picked up by the
// next append, but tokens already in the cache keep the old keys and values:
// reset() after a weight change). Not thread-safe: one Generator per thread, any number per model.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "nn/decoder.h"
#include "nn/gpt.h"
#include "nn/sampler.h"

namespace crucible::nn {

class Generator {
 public:
  // constant_weights: the model's weights stay fixed while the Generator is
  // used (`crucible generate`): its GEMMs read them packed once
  // (Decoder's pack_weights), as `crucible serve` does, and give the same
  // logits. Without it (the trainer's samples), updated weights are read.
  explicit Generator(const GPT& model, bool constant_weights = false);

  void reset();                          // forget the sequence
  int position() const { return pos_; }  // tokens consumed so far
  int capacity() const { return decoder_.config().seq_len; }
  int vocab_size() const { return decoder_.config().vocab_size; }

  // Appends n >= 1 tokens (ids in [0, V)) at positions position() ..
  // position()+n-1. Returns the logits (V) after the last of them, valid until
  // the next append() or reset(). Appending beyond capacity() is a
  // CRUCIBLE_CHECK failure: the caller slides the window (see generate()).
  const float* append(const int32_t* tokens, int n);

 private:
  Decoder decoder_;
  Tensor cache_;               // (L, 2, seq_len, C): one block
  const int32_t block0_ = 0;   // its block table
  int pos_ = 0;
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
