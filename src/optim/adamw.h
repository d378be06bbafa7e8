// AdamW over a ParamRegistry's flat buffers: decoupled weight decay (only on
// parameters whose spec says decay: the 2-D matmul weights; none on biases,
// LayerNorms and embeddings), global-norm gradient clipping, and the LR
// schedule (linear warmup + cosine decay to min_lr_ratio * lr).
// Moments m and v are flat buffers. Unsharded, they have the parameters'
// layout. Sharded (ZeRO), the optimizer owns a list of element ranges of the
// flat buffers — its shard — and m, v hold just those ranges, concatenated:
// it updates only its ranges' parameters and keeps 1/world of the state.
// export_moments / import_moments move the state to and from the full layout
// (checkpoints, resharding). Not thread-safe; kernels parallelise inside.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "kernels/device_scalars.h"
#include "nn/params.h"

namespace crucible::optim {

struct AdamWConfig {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  float grad_clip = 1.0f;  // max global L2 norm; <= 0 disables clipping
  // The moments' storage (optim.moments): f32, or bf16 (widened, updated in
  // f32 and rounded back in the same pass: 8 bytes a parameter less traffic).
  DType moments = DType::f32;
};

// Linear warmup over warmup_steps, then cosine decay to min_ratio * base_lr at
// total_steps. step counts from 0.
float lr_schedule(int64_t step, float base_lr, int64_t warmup_steps, int64_t total_steps,
                  float min_ratio = 0.1f);

// [begin, end) in elements of the flat parameter buffers.
struct Range {
  size_t begin = 0, end = 0;
};

struct StepInfo {
  double grad_norm = 0;  // before clipping
  float clip_scale = 1;  // factor applied to the gradients
};

// Sums a value over all ranks (the data-parallel layer supplies it).
using AllSum = std::function<double(double)>;

class AdamW {
 public:
  // shard: the ranges this optimizer updates, ascending and disjoint; empty
  // means every parameter (no sharding).
  AdamW(nn::ParamRegistry& params, const AdamWConfig& cfg, std::vector<Range> shard = {});

  // A step in three calls, its scalars on the parameters' device
  // (kernels/step_scalars.h, allocated with the moments), crossing to the
  // host twice: begin_step writes this step's lr and count there (the sums
  // zeroed) and returns them, for the step's kernels to add its loss to;
  // update adds the shard's squared gradient norm, forms the clip factor and
  // bias corrections there and updates the parameters, reading nothing back
  // but for the norm's sum over ranks (all_sum, when given, sums it through
  // the host; each counted element belongs to exactly one rank); end_step
  // reads the scalars back (waiting for the step's kernels) and counts the
  // step: update changes no host state, so a captured graph of it serves
  // every step (kernels/step_graph.h). The norm counts
  // the shard's gradients but replicas (ParamSpec::replica: another rank
  // holds the same gradient).
  kernels::StepScalars* begin_step(float lr);
  void update(const AllSum& all_sum = nullptr);
  kernels::StepScalars end_step();
  // The three at learning rate lr (tests and tools).
  StepInfo step(float lr, const AllSum& all_sum = nullptr);
  int64_t steps_taken() const { return t_; }
  void set_steps_taken(int64_t t) { t_ = t; }
  // The shard's moments, concatenated in range order (unsharded: full layout);
  // f32 moments only (checkpoints go through export/import_moments).
  float* m() const { return m_.f32(); }
  float* v() const { return v_.f32(); }
  const std::vector<Range>& shard() const { return shard_; }
  size_t shard_numel() const { return shard_numel_; }
  // Writes the shard's moments into full-layout buffers (numel() floats each;
  // other ranges untouched) / reads them back from full-layout buffers (bf16
  // moments: widened exactly, and rounded back, so a round trip is exact).
  void export_moments(float* m_full, float* v_full) const;
  void import_moments(const float* m_full, const float* v_full);
  // The shard's moments concatenated in range order (shard_numel() floats
  // each, f32 whatever the moments' dtype): what a checkpoint of a sharded
  // optimizer holds of this rank.
  void export_shard_moments(float* m, float* v) const;
  const AdamWConfig& config() const { return cfg_; }

 private:
  struct Group {
    size_t begin, end;  // element range of the flat buffers
    size_t state;       // offset of `begin` in m_ / v_
    bool decay;
  };
  void export_to(float* m_out, float* v_out, bool full) const;

  nn::ParamRegistry& params_;
  AdamWConfig cfg_;
  std::vector<Range> shard_;
  size_t shard_numel_ = 0;
  Tensor m_, v_;
  kernels::DeviceScalars scalars_;
  std::vector<Group> groups_;  // runs with the same decay flag, within one range
  std::vector<Range> norm_;    // the shard without replicas: what the norm counts
  int64_t t_ = 0;
};

}  // namespace crucible::optim
