#include "nn/params.h"

#include <cstring>

#include "core/hash.h"
#include "core/rng.h"
#include "kernels/kernels.h"

namespace crucible::nn {

void for_each_run(const ParamSpec& s, const std::function<void(size_t, size_t, size_t)>& fn) {
  if (s.shard.whole()) {
    fn(0, 0, s.numel);
    return;
  }
  const int d = s.shard.dim;
  size_t outer = 1, inner = 1;
  for (int i = 0; i < d; ++i) outer *= size_t(s.whole_shape[i]);
  for (int i = d + 1; i < s.whole_shape.ndim; ++i) inner *= size_t(s.whole_shape[i]);
  const size_t extent = size_t(s.whole_shape[d]);
  size_t local = 0;
  for (size_t o = 0; o < outer; ++o)
    for (const Shard::Piece& p : s.shard.pieces) {
      const size_t n = size_t(p.hi - p.lo) * inner;
      fn(local, (o * extent + size_t(p.lo)) * inner, n);
      local += n;
    }
}

void copy_from_whole(const ParamSpec& s, const float* whole, float* local) {
  for_each_run(s, [&](size_t l, size_t w, size_t n) { std::memcpy(local + l, whole + w, n * sizeof(float)); });
}

void copy_to_whole(const ParamSpec& s, const float* local, float* whole) {
  for_each_run(s, [&](size_t l, size_t w, size_t n) { std::memcpy(whole + w, local + l, n * sizeof(float)); });
}

size_t ParamRegistry::add(std::string name, Shape shape, bool decay, Init init, float init_std) {
  return add(std::move(name), shape, Shard{}, decay, init, init_std);
}

size_t ParamRegistry::add(std::string name, Shape whole, const Shard& shard, bool decay, Init init,
                          float init_std) {
  CRUCIBLE_CHECK(!values_.defined(), "[nn] parameter registered after allocate()");
  Shape shape = whole;
  if (!shard.whole()) {
    CRUCIBLE_CHECK(shard.dim < whole.ndim && !shard.pieces.empty(), "[nn] a shard splits one of the tensor's dimensions");
    int64_t n = 0;
    for (const Shard::Piece& p : shard.pieces) {
      CRUCIBLE_CHECK(0 <= p.lo && p.lo < p.hi && p.hi <= whole[shard.dim], "[nn] shard pieces lie inside the tensor");
      n += p.hi - p.lo;
    }
    shape.d[size_t(shard.dim)] = n;
  }
  ParamSpec s;
  s.name = std::move(name);
  s.shape = shape;
  s.whole_shape = whole;
  s.shard = shard;
  s.numel = size_t(shape.numel());
  // Keep every parameter 64-byte aligned inside the flat buffer (vector loads, GEMM).
  s.offset = (total_ + 15) / 16 * 16;
  s.decay = decay;
  s.init = init;
  s.init_std = init_std;
  total_ = s.offset + s.numel;
  specs_.push_back(std::move(s));
  return specs_.size() - 1;
}

void ParamRegistry::allocate(bool bf16_copy, Device device) {
  total_ = (total_ + 15) / 16 * 16;
  const Shape n{int64_t(total_)};
  values_ = Tensor::zeros(n, DType::f32, "nn.params", device);
  grads_ = Tensor::zeros(n, DType::f32, "nn.grads", device);
  if (bf16_copy) values_bf16_ = Tensor::zeros(n, DType::bf16, "nn.params_bf16", device);
  if (!device.is_cpu()) host_ = Tensor::zeros(n, DType::f32, "nn.params_host");
}

float* ParamRegistry::host_values() const { return host_.defined() ? host_.f32() : values(); }

void ParamRegistry::upload() {
  if (host_.defined()) kernels::copy_and_wait(device(), values(), host_.f32(), total_ * sizeof(float));
  kernels::DeviceScope on(device());
  refresh_bf16();
}

void ParamRegistry::download() const {
  if (host_.defined()) kernels::copy_and_wait(device(), host_.f32(), values(), total_ * sizeof(float));
}

Param ParamRegistry::param(size_t index) const {
  CRUCIBLE_CHECK(values_.defined(), "[nn] parameter view before allocate()");
  const ParamSpec& s = specs_.at(index);
  return Param{values_.f32() + s.offset, grads_.f32() + s.offset,
               values_bf16_.defined() ? values_bf16_.bf16_data() + s.offset : nullptr};
}

bf16* ParamRegistry::values_bf16() const {
  return values_bf16_.defined() ? values_bf16_.bf16_data() : nullptr;
}

void ParamRegistry::refresh_bf16(size_t begin, size_t end) {
  if (!values_bf16_.defined()) return;
  end = std::min(end, total_);
  if (begin < end) kernels::convert_to_bf16(values_bf16() + begin, values() + begin, end - begin);
}

const ParamSpec* ParamRegistry::find(const std::string& name) const {
  for (auto& s : specs_)
    if (s.name == name) return &s;
  return nullptr;
}

void ParamRegistry::init(uint64_t seed) {
  for (auto& s : specs_) {
    float* p = host_values() + s.offset;
    switch (s.init) {
      case Init::zeros: std::memset(p, 0, s.numel * sizeof(float)); break;
      case Init::ones:
        for (size_t i = 0; i < s.numel; ++i) p[i] = 1.0f;
        break;
      case Init::normal: {
        Rng rng(seed, fnv1a64(s.name));
        // Rng::normal takes two draws per value: element k sits at 2k.
        for_each_run(s, [&](size_t local, size_t whole, size_t n) {
          rng.seek(2 * uint64_t(whole));
          rng.fill_normal(p + local, n, 0.0f, s.init_std);
        });
        break;
      }
    }
  }
  upload();
}

void ParamRegistry::zero_grad() {
  kernels::fill(grads_.f32(), total_, 0.0f);
}

}  // namespace crucible::nn
