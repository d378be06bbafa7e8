// What the planner's unit tests share: the shipped cluster files' paths, a
// workload's model, and a small, exactly known cluster (2 nodes x 4 devices,
// flat efficiencies) whose figures the tests' formulas use.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "nn/workloads.h"
#include "plan/cluster.h"

namespace crucible::plan {

inline std::string shipped(const std::string& name) {
  return std::string(CRUCIBLE_SOURCE_DIR) + "/configs/clusters/" + name + ".toml";
}

inline nn::GPTConfig workload(const char* name) {
  auto w = nn::find_workload(name);
  EXPECT_TRUE(w) << name;
  return w->model;
}

// A small, exactly known cluster: 2 nodes x 4 devices, flat efficiencies.
inline constexpr const char* kToyCluster = R"(
name = "toy"
nodes = 2
devices_per_node = 4
[device]
name = "toy-gpu"
memory_gb = 16
memory_bandwidth_gbs = 1000
peak_tflops = { fp32 = 10, bf16 = 100 }
attention_efficiency = { fp32 = 0.5, bf16 = 0.5 }
[device.gemm_efficiency]
fp32 = [[1024, 1024, 1024, 0.8]]
bf16 = [[1024, 1024, 1024, 0.8]]
[links.intra]
latency_us = 2
bandwidth_gbs = 100
[links.inter]
latency_us = 10
bandwidth_gbs = 10
)";

inline Cluster toy() {
  auto c = parse_cluster(kToyCluster, "toy.toml");
  EXPECT_TRUE(c) << c.status().message();
  return *c;
}

}  // namespace crucible::plan
