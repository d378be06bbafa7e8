#include "optim/adamw.h"

#include <cmath>

#include "kernels/kernels.h"

namespace crucible::optim {

float lr_schedule(int64_t step, float base_lr, int64_t warmup_steps, int64_t total_steps,
                  float min_ratio) {
  if (warmup_steps > 0 && step < warmup_steps)
    return base_lr * float(step + 1) / float(warmup_steps);
  if (total_steps <= warmup_steps) return base_lr;
  double progress = double(step - warmup_steps) / double(total_steps - warmup_steps);
  progress = std::min(1.0, std::max(0.0, progress));
  double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return float(base_lr * (min_ratio + (1.0 - min_ratio) * cosine));
}

AdamW::AdamW(nn::ParamRegistry& params, const AdamWConfig& cfg) : params_(params), cfg_(cfg) {
  int64_t n = int64_t(params.numel());
  m_ = Tensor::zeros(Shape{n}, DType::f32, "optim.adam_m");
  v_ = Tensor::zeros(Shape{n}, DType::f32, "optim.adam_v");
  // The padding between parameters is zero in every buffer and stays zero, so
  // a group may span it: groups are maximal runs of equal decay flag.
  for (const auto& s : params.specs()) {
    if (!groups_.empty() && groups_.back().decay == s.decay) {
      groups_.back().end = s.offset + s.numel;
    } else {
      size_t begin = groups_.empty() ? 0 : groups_.back().end;
      groups_.push_back(Group{begin, s.offset + s.numel, s.decay});
    }
  }
  if (!groups_.empty()) groups_.back().end = params.numel();
}

StepInfo AdamW::step(float lr) {
  StepInfo info;
  float* g = params_.grads();
  info.grad_norm = std::sqrt(kernels::sum_squares(g, params_.numel()));
  // PyTorch's clip_grad_norm_: scale by max_norm / (norm + 1e-6) when below 1.
  if (cfg_.grad_clip > 0) {
    double coef = cfg_.grad_clip / (info.grad_norm + 1e-6);
    if (coef < 1.0) info.clip_scale = float(coef);
  }
  ++t_;
  float* p = params_.values();
  for (const Group& gr : groups_)
    kernels::adamw(p + gr.begin, g + gr.begin, m() + gr.begin, v() + gr.begin,
                   gr.end - gr.begin, lr, cfg_.beta1, cfg_.beta2, cfg_.eps,
                   gr.decay ? cfg_.weight_decay : 0.0f, info.clip_scale, int(t_));
  return info;
}

}  // namespace crucible::optim
