// Next-token sampling from a row of logits: greedy, temperature, top-k and
// top-p (nucleus).
//
// A pure function of (logits, config, Rng state): the same seed and stream
// give the same tokens on every machine. Greedy decoding draws nothing from
// the Rng; any other setting draws exactly one uniform() per token, so a
// resumed generation can seek() its Rng to the token count. Reuses one
// thread-local scratch row, so steady-state calls allocate nothing;
// thread-safe for distinct Rngs.
#pragma once
#include <cstdint>

#include "core/rng.h"

namespace crucible::nn {

struct SamplingConfig {
  float temperature = 1.0f;  // <= 0: greedy argmax
  int top_k = 0;             // keep only the top_k largest logits; 0 (or >= V) = all
  // > 0: generate() samples only ids below it (a padded embedding's extra
  // rows, model.vocab_size above the tokenizer's, stand for no text).
  int vocab = 0;
  // < 1: then keep only the most likely tokens whose probabilities (after
  // temperature and top-k) first sum to at least top_p (at least one token).
  float top_p = 1.0f;
};

// logits (V). temperature <= 0: argmax (lowest index on ties). Otherwise a draw
// from softmax(logits / temperature) restricted to the top_k largest logits
// (ties at the k-th value broken towards the lower index), then to the
// nucleus of top_p (ties broken towards the lower index).
int32_t sample_token(const float* logits, int V, const SamplingConfig& cfg, Rng& rng);

}  // namespace crucible::nn
