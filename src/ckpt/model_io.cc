#include "ckpt/model_io.h"

#include <cmath>

#include <cstring>

#include "ckpt/safetensors.h"

namespace crucible::ckpt {

Status save_params(const nn::ParamRegistry& params, const std::string& path, bool grads,
                   const std::map<std::string, std::string>& metadata, DType dtype) {
  std::vector<TensorView> views;
  CRUCIBLE_CHECK(!grads || params.device().is_cpu(), "[weights] saving a GPU model's gradients");
  if (!grads) params.download();  // a GPU's weights: through the host copy
  const float* base = grads ? params.grads() : params.host_values();
  // BF16: every value rounded to nearest even, as the bf16 working copy is.
  std::vector<bf16> rounded(dtype == DType::bf16 ? params.numel() : 0);
  for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = to_bf16(base[i]);
  for (const auto& s : params.specs()) {
    TensorView v{s.name, dtype == DType::bf16 ? "BF16" : "F32", {},
                 dtype == DType::bf16 ? static_cast<const void*>(rounded.data() + s.offset) : base + s.offset};
    for (int i = 0; i < s.shape.ndim; ++i) v.shape.push_back(s.shape[i]);
    views.push_back(std::move(v));
  }
  return write_safetensors(path, views, metadata);
}

Status check_finite(const std::string& where, const std::string& name, const float* v, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i]))
      return Status::corrupt("[weights] " + where + ": tensor " + name + " holds " +
                             (std::isnan(v[i]) ? "NaN" : "an infinity") + " at element " + std::to_string(i));
  return Status::ok();
}

Status load_params(nn::ParamRegistry& params, const std::string& path, bool part) {
  auto file = read_safetensors(path);
  if (!file) return file.status();
  size_t matched = 0;
  for (const auto& s : params.specs()) {
    const LoadedTensor* t = file->find(s.name);
    if (!t) return Status::corrupt("[weights] " + path + ": missing tensor " + s.name);
    // A tensor-parallel shard takes its part of the whole tensor.
    std::vector<int64_t> want(s.whole_shape.d.begin(), s.whole_shape.d.begin() + s.whole_shape.ndim);
    if (t->dtype != "F32" || t->shape != want)
      return Status::corrupt("[weights] " + path + ": tensor " + s.name + " is " + t->dtype +
                             " with a shape other than the model's " + s.whole_shape.str());
    const float* v = reinterpret_cast<const float*>(t->bytes.data());
    CRUCIBLE_RETURN_IF_ERROR(check_finite(path, s.name, v, t->bytes.size() / sizeof(float)));
    nn::copy_from_whole(s, v, params.host_values() + s.offset);
    ++matched;
  }
  if (!part && matched != file->tensors.size())
    return Status::corrupt("[weights] " + path + ": holds " + std::to_string(file->tensors.size()) +
                           " tensors, the model has " + std::to_string(matched));
  params.upload();  // to a GPU's memory; bf16 models: the working copy of the loaded weights
  return Status::ok();
}

}  // namespace crucible::ckpt
