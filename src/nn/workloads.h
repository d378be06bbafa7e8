// The standard training workloads of DESIGN.md, by name.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "nn/gpt.h"

namespace crucible::nn {

struct Workload {
  std::string name;
  GPTConfig model;
  int batch = 0;  // sequences per step; T = model.seq_len
};

std::optional<Workload> find_workload(const std::string& name);
std::vector<std::string> workload_names();

}  // namespace crucible::nn
