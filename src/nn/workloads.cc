#include "nn/workloads.h"

namespace crucible::nn {
namespace {
const std::vector<Workload>& all() {
  static const std::vector<Workload> w = {
      {"tiny", GPTConfig{4, 4, 256, 8192, 256}, 8},
      {"gpt2-124M", GPTConfig{12, 12, 768, 50304, 64}, 4},
      // DESIGN.md's GPU workloads: the shapes PyTorch and llm.c publish
      // figures for (T = 1024; batch 16, and 32 through --batch).
      {"gpt2-124M-T1024", GPTConfig{12, 12, 768, 50304, 1024}, 16},
      {"gpt2-350M-T1024", GPTConfig{24, 16, 1024, 50304, 1024}, 16},
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
