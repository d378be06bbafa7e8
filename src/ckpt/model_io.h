// GPT weights as safetensors with Hugging Face GPT-2 names and layouts
// (Conv1D weights are (in,out); the LM head is tied to wte and not stored),
// so PyTorch / HF tooling loads crucible's weights and vice versa.
#pragma once
#include <map>
#include <string>

#include "core/status.h"
#include "nn/params.h"

namespace crucible::ckpt {

// Writes every parameter (or, with grads=true, every gradient) of `params`,
// as F32 or (dtype bf16: `crucible export --dtype bf16`) rounded to BF16.
Status save_params(const nn::ParamRegistry& params, const std::string& path, bool grads = false,
                   const std::map<std::string, std::string>& metadata = {}, DType dtype = DType::f32);
// Loads every parameter by name; a missing tensor, an extra tensor, or a shape
// or dtype mismatch is an error naming the tensor. part: `params` is a part of
// the model (a pipeline stage): the file's other tensors are not its.
Status load_params(nn::ParamRegistry& params, const std::string& path, bool part = false);
// Ok when every value of tensor `name` (n floats) is finite; else corrupt,
// "[weights] WHERE: tensor NAME holds NaN at element I".
Status check_finite(const std::string& where, const std::string& name, const float* v, size_t n);

}  // namespace crucible::ckpt
