// GPT: exactly the GPT-2 architecture (learned positions, pre-LayerNorm with
// eps 1e-5, biases on every linear, GELU tanh, tied embedding / LM head,
// init N(0, 0.02) with residual projections scaled by 1/sqrt(2 n_layer)).
//
// Owns the ParamRegistry (one flat buffer for parameters, one for gradients).
// Activations come from the caller's step arena; forward saves what backward
// needs there, so call arena.reset() before each micro-batch's forward and
// backward() before the next reset(). Not thread-safe.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "nn/layers.h"
#include "nn/params.h"

namespace crucible::nn {

struct GPTConfig {
  int n_layer = 4;
  int n_head = 4;
  int n_embd = 256;
  int vocab_size = 8192;
  int seq_len = 256;  // maximum T (rows of wpe)

  Status validate() const;
  // N of the PaLM FLOP count: every parameter except the position table
  // (biases and LayerNorms included; they are <0.2% of it).
  int64_t matmul_params() const;
  // Training FLOPs per token: 6 N + 12 L C T (PaLM), N = matmul_params().
  double flops_per_token(int T) const;
};

class GPT {
 public:
  explicit GPT(const GPTConfig& cfg);

  // Sizes known before anything is allocated (the memory check and planner):
  // floats in the flat parameter buffer (padding included; the gradient
  // buffer is as large), and the peak bytes of the step arena for one
  // micro-batch of B sequences of T tokens (forward + backward).
  static size_t flat_params(const GPTConfig& cfg);
  static size_t activation_bytes(const GPTConfig& cfg, int B, int T);

  const GPTConfig& config() const { return cfg_; }
  ParamRegistry& params() { return params_; }
  const ParamRegistry& params() const { return params_; }
  void init_weights(uint64_t seed) { params_.init(seed); }

  // tokens, targets (B,T) int32 (targets may be null: logits only).
  // Returns the mean cross-entropy loss over B*T (0 without targets).
  // grad_scale != 0 prepares backward(): the loss gradient, scaled by
  // grad_scale / (B*T), is formed in place of the logits (fused kernel).
  float forward(Arena& arena, const int32_t* tokens, const int32_t* targets, int B, int T,
                float grad_scale = 0.0f);
  // Called during backward with an offset into the flat gradient buffer:
  // every gradient at or after it is final for this backward (used to start
  // communicating gradient buckets while backward continues).
  using GradsReady = std::function<void(size_t ready_from)>;
  // Accumulates (+=) every parameter gradient for the last forward.
  void backward(Arena& arena, const GradsReady& grads_ready = nullptr);

  // (B,T,V) logits of the last forward when it ran with grad_scale == 0.
  const float* logits() const { return logits_; }
  const float* losses() const { return losses_; }

 private:
  GPTConfig cfg_;
  ParamRegistry params_;
  Embedding embed_;
  std::vector<Block> blocks_;
  LayerNorm ln_f_;
  // State of the last forward.
  int B_ = 0, T_ = 0;
  float* lnf_out_ = nullptr;  // (B,T,C)
  float* logits_ = nullptr;   // (B,T,V), or dlogits after a training forward
  float* losses_ = nullptr;   // (B,T)
  bool have_grad_ = false;
};

}  // namespace crucible::nn
