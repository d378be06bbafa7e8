#include "runtime/device_check.h"

#include <string>
#include <vector>

#include "kernels/cuda/cuda.h"
#include "kernels/kernels.h"

namespace crucible::runtime {

namespace {

// The step's kernels (kernels/signatures.inc) a device's table lacks, for
// this precision; GEMM is not in the table (kernels::gemm dispatches itself).
std::vector<std::string> missing_kernels(const kernels::KernelTable& t, bool bf16) {
  // The entry of this precision, named as in the table.
  auto of = [&](const char* name, bool have, bool have16) {
    return std::pair<std::string, bool>(bf16 ? std::string(name) + "_bf16" : name, bf16 ? have16 : have);
  };
  const std::vector<std::pair<std::string, bool>> need = {
      {"embedding_forward", t.embedding_forward != nullptr},
      {"embedding_backward", t.embedding_backward != nullptr},
      of("residual_layernorm_forward", t.residual_layernorm_forward, t.residual_layernorm_forward_bf16),
      {"layernorm_backward", t.layernorm_backward != nullptr},
      of("bias_gelu_forward", t.bias_gelu_forward, t.bias_gelu_forward_bf16),
      of("bias_gelu_backward", t.bias_gelu_backward, t.bias_gelu_backward_bf16),
      of("attention_forward", t.attention_forward, t.attention_forward_bf16),
      of("attention_backward", t.attention_backward, t.attention_backward_bf16),
      of("softmax_cross_entropy", t.softmax_cross_entropy, t.softmax_cross_entropy_bf16),
      {"adamw_scalars", t.adamw_scalars != nullptr},
      {"adamw", t.adamw != nullptr},
      {"add_sum_squares", t.add_sum_squares != nullptr},
      {"add_mean", t.add_mean != nullptr},
      {"fill", t.fill != nullptr},
      {"copy_bytes", t.copy_bytes != nullptr},
      {"convert_to_bf16", t.convert_to_bf16 != nullptr}};
  std::vector<std::string> out;
  for (const auto& [name, have] : need)
    if (!have) out.push_back(name);
  return out;
}

}  // namespace

Status check_device(const Config& cfg, std::optional<Device> placed) {
  auto device = placed ? Result<Device>(*placed) : Device::parse(cfg.run.device);
  if (!device) return Status::invalid("[train] run.device: " + device.status().message());
  if (device->is_cpu()) return Status::ok();
  const std::string key = "[train] run.device = " + device->str();
  auto strip = [](const std::string& m) { return m.rfind("[cuda] ", 0) == 0 ? m.substr(7) : m; };
  if (Status s = kernels::cuda::use_device(device->index); !s) return Status::invalid(key + ": " + strip(s.message()));
  auto info = kernels::cuda::device_info(device->index);
  const std::string named = key + (info ? " (" + info->name + ")" : "");
  // Several ranks: their collectives on device buffers (comm/device_comm.h).
  if (cfg.dist.reproducible)
    return Status::invalid(named + ": dist.reproducible's tree reduction runs on the host; leave it false on a GPU");
  const std::vector<std::string> missing =
      missing_kernels(kernels::cuda::kernel_table(), cfg.train.precision == "bf16");
  if (missing.empty()) return Status::ok();
  std::string list;
  for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
  return Status::invalid(named + ": the CUDA backend lacks " + list + "; see docs/gpu.md");
}

}  // namespace crucible::runtime
