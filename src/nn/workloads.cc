#include "nn/workloads.h"

namespace crucible::nn {
namespace {
const std::vector<Workload>& all() {
  static const std::vector<Workload> w = {
      {"tiny", GPTConfig{4, 4, 256, 8192, 256}, 8},
      {"gpt2-124M", GPTConfig{12, 12, 768, 50304, 64}, 4},
  };
  return w;
}
}  // namespace

std::optional<Workload> find_workload(const std::string& name) {
  for (const auto& w : all())
    if (w.name == name) return w;
  return std::nullopt;
}

std::vector<std::string> workload_names() {
  std::vector<std::string> n;
  for (const auto& w : all()) n.push_back(w.name);
  return n;
}

}  // namespace crucible::nn
