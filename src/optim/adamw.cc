#include "optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
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

AdamW::AdamW(nn::ParamRegistry& params, const AdamWConfig& cfg, std::vector<Range> shard)
    : params_(params), cfg_(cfg), shard_(std::move(shard)), scalars_(params.device()) {
  if (shard_.empty()) shard_.push_back(Range{0, params.numel()});
  for (const Range& r : shard_) {
    CRUCIBLE_CHECK(r.begin <= r.end && r.end <= params.numel(), "[optim] shard range in bounds");
    shard_numel_ += r.end - r.begin;
  }
  // Beside the parameters: on their device.
  m_ = Tensor::zeros(Shape{int64_t(shard_numel_)}, cfg.moments, "optim.adam_m", params.device());
  v_ = Tensor::zeros(Shape{int64_t(shard_numel_)}, cfg.moments, "optim.adam_v", params.device());
  // Decay runs of the full layout: maximal runs of equal decay flag. The
  // padding between parameters is zero in every buffer and stays zero, so a
  // run may span it.
  std::vector<Group> runs;
  for (const auto& s : params.specs()) {
    if (!runs.empty() && runs.back().decay == s.decay) {
      runs.back().end = s.offset + s.numel;
    } else {
      size_t begin = runs.empty() ? 0 : runs.back().end;
      runs.push_back(Group{begin, s.offset + s.numel, 0, s.decay});
    }
  }
  if (!runs.empty()) runs.back().end = params.numel();
  // The groups: each shard range cut at the runs' boundaries.
  size_t state = 0;
  for (const Range& r : shard_) {
    for (const Group& run : runs) {
      size_t b = std::max(r.begin, run.begin), e = std::min(r.end, run.end);
      if (b < e) groups_.push_back(Group{b, e, state + (b - r.begin), run.decay});
    }
    state += r.end - r.begin;
  }
  // The norm's ranges: the shard cut around every replica.
  for (const Range& r : shard_) {
    size_t at = r.begin;
    for (const auto& s : params.specs()) {
      if (!s.replica || s.offset + s.numel <= at || s.offset >= r.end) continue;
      if (s.offset > at) norm_.push_back(Range{at, s.offset});
      at = std::min(r.end, s.offset + s.numel);
    }
    if (at < r.end) norm_.push_back(Range{at, r.end});
  }
}

kernels::StepScalars* AdamW::begin_step(float lr) {
  kernels::StepScalars in;
  in.lr = lr;
  in.t = int32_t(t_ + 1);
  scalars_.write(in);
  return scalars_.get();
}

void AdamW::update(const AllSum& all_sum) {
  kernels::StepScalars* s = scalars_.get();
  float* g = params_.grads();
  for (const Range& r : norm_) kernels::add_sum_squares(&s->grad_sq, g + r.begin, r.end - r.begin);
  if (all_sum) {
    // The ranks' sum goes through the host (MPI carries the control plane):
    // the one read-back a step of several ranks adds.
    double sq = 0;
    kernels::copy_and_wait(params_.device(), &sq, &s->grad_sq, sizeof sq);
    sq = all_sum(sq);
    kernels::copy_and_wait(params_.device(), &s->grad_sq, &sq, sizeof sq);
  }
  kernels::adamw_scalars(s, cfg_.grad_clip, cfg_.beta1, cfg_.beta2);
  float* p = params_.values();
  bf16* p16 = params_.values_bf16();  // bf16 models: the working copy, refreshed in the same pass
  for (const Group& gr : groups_) {
    bf16* p16g = p16 ? p16 + gr.begin : nullptr;
    const float wd = gr.decay ? cfg_.weight_decay : 0.0f;
    if (cfg_.moments == DType::bf16)
      kernels::adamw_bf16_moments(p + gr.begin, p16g, g + gr.begin, m_.bf16_data() + gr.state,
                                  v_.bf16_data() + gr.state, gr.end - gr.begin, s, cfg_.beta1, cfg_.beta2, cfg_.eps,
                                  wd);
    else
      kernels::adamw(p + gr.begin, p16g, g + gr.begin, m() + gr.state, v() + gr.state, gr.end - gr.begin, s,
                     cfg_.beta1, cfg_.beta2, cfg_.eps, wd);
  }
}

kernels::StepScalars AdamW::end_step() {
  ++t_;
  return scalars_.read();
}

StepInfo AdamW::step(float lr, const AllSum& all_sum) {
  begin_step(lr);
  update(all_sum);
  const kernels::StepScalars out = end_step();
  return StepInfo{std::sqrt(out.grad_sq), out.clip};
}

void AdamW::export_moments(float* m_full, float* v_full) const { export_to(m_full, v_full, true); }

void AdamW::export_shard_moments(float* m, float* v) const { export_to(m, v, false); }

namespace {

// A moment buffer as host code reads it: itself on the CPU; on a GPU a host
// copy (to_host) or a host staging buffer sent on by from_host.
Tensor to_host(const Tensor& t) {
  if (t.device().is_cpu()) return t;
  Tensor h = Tensor::empty(t.shape(), t.dtype(), "optim.adam_host");
  kernels::copy_and_wait(t.device(), h.data(), t.data(), t.nbytes());
  return h;
}
Tensor host_staging(const Tensor& t) {
  return t.device().is_cpu() ? t : Tensor::empty(t.shape(), t.dtype(), "optim.adam_host");
}
void from_host(const Tensor& staged, Tensor& t) {
  if (staged.data() != t.data()) kernels::copy_and_wait(t.device(), t.data(), staged.data(), t.nbytes());
}

}  // namespace

void AdamW::export_to(float* m_out, float* v_out, bool full) const {
  const Tensor mh = to_host(m_), vh = to_host(v_);
  size_t state = 0;
  for (const Range& r : shard_) {
    const size_t n = r.end - r.begin, at = full ? r.begin : state;
    if (cfg_.moments == DType::bf16) {
      for (size_t i = 0; i < n; ++i) {
        m_out[at + i] = to_f32(mh.bf16_data()[state + i]);
        v_out[at + i] = to_f32(vh.bf16_data()[state + i]);
      }
    } else {
      std::memcpy(m_out + at, mh.f32() + state, n * sizeof(float));
      std::memcpy(v_out + at, vh.f32() + state, n * sizeof(float));
    }
    state += n;
  }
}

void AdamW::import_moments(const float* m_full, const float* v_full) {
  Tensor mh = host_staging(m_), vh = host_staging(v_);
  {
    kernels::DeviceScope host(Device::cpu());  // host buffers, whatever the caller's device
    size_t state = 0;
    for (const Range& r : shard_) {
      const size_t n = r.end - r.begin;
      if (cfg_.moments == DType::bf16) {
        kernels::convert_to_bf16(mh.bf16_data() + state, m_full + r.begin, n);
        kernels::convert_to_bf16(vh.bf16_data() + state, v_full + r.begin, n);
      } else {
        std::memcpy(mh.f32() + state, m_full + r.begin, n * sizeof(float));
        std::memcpy(vh.f32() + state, v_full + r.begin, n * sizeof(float));
      }
      state += n;
    }
  }
  from_host(mh, m_);
  from_host(vh, v_);
}

}  // namespace crucible::optim
