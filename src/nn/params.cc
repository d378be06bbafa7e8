#include "nn/params.h"

#include <cstring>

#include "core/hash.h"
#include "core/rng.h"

namespace crucible::nn {

size_t ParamRegistry::add(std::string name, Shape shape, bool decay, Init init, float init_std) {
  CRUCIBLE_CHECK(!values_.defined(), "[nn] parameter registered after allocate()");
  ParamSpec s;
  s.name = std::move(name);
  s.shape = shape;
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

void ParamRegistry::allocate() {
  total_ = (total_ + 15) / 16 * 16;
  values_ = Tensor::zeros(Shape{int64_t(total_)}, DType::f32, "nn.params");
  grads_ = Tensor::zeros(Shape{int64_t(total_)}, DType::f32, "nn.grads");
}

Param ParamRegistry::param(size_t index) const {
  CRUCIBLE_CHECK(values_.defined(), "[nn] parameter view before allocate()");
  const ParamSpec& s = specs_.at(index);
  return Param{values_.f32() + s.offset, grads_.f32() + s.offset};
}

const ParamSpec* ParamRegistry::find(const std::string& name) const {
  for (auto& s : specs_)
    if (s.name == name) return &s;
  return nullptr;
}

void ParamRegistry::init(uint64_t seed) {
  for (auto& s : specs_) {
    float* p = values_.f32() + s.offset;
    switch (s.init) {
      case Init::zeros: std::memset(p, 0, s.numel * sizeof(float)); break;
      case Init::ones:
        for (size_t i = 0; i < s.numel; ++i) p[i] = 1.0f;
        break;
      case Init::normal: {
        Rng rng(seed, fnv1a64(s.name));
        rng.fill_normal(p, s.numel, 0.0f, s.init_std);
        break;
      }
    }
  }
}

void ParamRegistry::zero_grad() {
  float* g = grads_.f32();
  size_t n = total_;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i += 16384) std::memset(g + i, 0, std::min<size_t>(16384, n - i) * 4);
}

}  // namespace crucible::nn
