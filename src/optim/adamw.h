// AdamW over a ParamRegistry's flat buffers: decoupled weight decay (only on
// parameters whose spec says decay: the 2-D matmul weights; none on biases,
// LayerNorms and embeddings), global-norm gradient clipping, and the LR
// schedule (linear warmup + cosine decay to min_lr_ratio * lr).
// Moments m and v are flat buffers with the parameters' layout, so ZeRO and
// checkpoints can slice them. Not thread-safe; kernels parallelise inside.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "nn/params.h"

namespace crucible::optim {

struct AdamWConfig {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  float grad_clip = 1.0f;  // max global L2 norm; <= 0 disables clipping
};

// Linear warmup over warmup_steps, then cosine decay to min_ratio * base_lr at
// total_steps. step counts from 0.
float lr_schedule(int64_t step, float base_lr, int64_t warmup_steps, int64_t total_steps,
                  float min_ratio = 0.1f);

struct StepInfo {
  double grad_norm = 0;  // before clipping
  float clip_scale = 1;  // factor applied to the gradients
};

class AdamW {
 public:
  AdamW(nn::ParamRegistry& params, const AdamWConfig& cfg);

  // One update with learning rate lr over all parameters.
  StepInfo step(float lr);
  int64_t steps_taken() const { return t_; }
  void set_steps_taken(int64_t t) { t_ = t; }
  float* m() const { return m_.f32(); }
  float* v() const { return v_.f32(); }
  const AdamWConfig& config() const { return cfg_; }

 private:
  struct Group {
    size_t begin, end;  // element range of the flat buffers
    bool decay;
  };
  nn::ParamRegistry& params_;
  AdamWConfig cfg_;
  Tensor m_, v_;
  std::vector<Group> groups_;  // contiguous runs with the same decay flag
  int64_t t_ = 0;
};

}  // namespace crucible::optim
