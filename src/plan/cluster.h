// A cluster description: what the planner knows of the hardware a job may
// run on (docs/plan.md, "Cluster files"). One TOML file: nodes x devices,
// one device kind (peak FLOP/s per precision, achievable GEMM efficiency
// against the GEMM's size, the attention kernel's and memory-bound kernels'
// efficiency, memory capacity and bandwidth), and two links (inside a node,
// between nodes) as alpha-beta per collective kind. Shipped files:
// configs/clusters/*.toml; this machine's comes from `crucible probe`
// (cluster_from_probe). Parsing is strict: an unknown key, a wrong type or
// an impossible value is invalid, naming the key.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace crucible::plan {

enum class Collective { kAllreduce, kAllgather, kReduceScatter, kP2p };
const char* collective_name(Collective k);

// time(bytes) = latency + bytes x factor / bandwidth, the ring's traffic
// per rank (busbw, nccl-tests' convention): allreduce 2(n-1)/n with 2(n-1)
// latency hops, allgather and reduce-scatter (n-1)/n with n-1 hops, p2p one
// message. bytes: the whole buffer (allreduce's array, allgather's output,
// reduce-scatter's input).
struct AlphaBeta {
  double latency_s = 0;
  double bandwidth_Bps = 0;  // bus bandwidth per device
};

struct Link {
  AlphaBeta kinds[4];  // by Collective
  double time(Collective kind, double bytes, int group) const;
};

struct Device {
  std::string name;
  double memory_bytes = 0;
  double memory_bandwidth_Bps = 0;
  double memory_efficiency = 1;  // what streaming kernels reach of it
  double peak_flops[2] = {0, 0};  // [fp32, bf16]
  // Measured or specified GEMMs per precision: (m, n, k) and the fraction of
  // peak reached. Between them: inverse-square-distance weighting in
  // (log m, log n, log k), exact at an entry, tending to the nearest entries'
  // values far from all (a skinny GEMM takes after skinny entries, a large
  // one after large ones).
  struct GemmPoint {
    double m, n, k, efficiency;
  };
  std::vector<GemmPoint> gemm_efficiency[2];
  double attention_efficiency[2] = {0.3, 0.3};  // of peak, the fused attention kernel
  // Power drawn under a training load (W; 0: unknown), for the energy a step
  // costs: a GPU's board, or for a shared node (CPUs) the whole node's
  // packages, as peak_flops is given for the whole node.
  double power_w = 0;
  // bf16 GEMMs run on f32 copies of their operands (a CPU without a bf16
  // matmul, kernels::gemm_bf16_native() false): the widening buffer counts in
  // a bf16 layout's memory (plan/memory_model.h).
  bool bf16_widened = false;
  double gemm_efficiency_at(int precision, double m, double n, double k) const;
};

// What the training code on the cluster does beyond what the hardware
// fixes (docs/plan.md, "The stack"). The defaults are crucible's own code
// today; a file describing another code (Megatron-Core, to check the model
// against its published results) says what that code does.
struct Stack {
  // Tensor-parallel collectives carry the working precision's activations
  // (bf16 in a bf16 run, as Megatron's do) instead of f32 (crucible's: its
  // tensor-parallel sum is an f32 gather summed in rank order).
  bool tp_comm_working = false;
  // The fraction of the tensor-parallel collectives' time hidden behind the
  // block's GEMMs (Megatron-Core's --tp-comm-overlap splits the all-gather and
  // reduce-scatter into chunks pipelined with the GEMMs); never more than the
  // GEMMs' own time.
  double tp_overlap = 0;
  // Host time to launch one kernel: where a chunk's launches take longer than
  // its GPU work, the GPU waits (0: no such cost, as on a CPU).
  double launch_s = 0;
  // The steady-state step's launches replayed from captured CUDA graphs: one
  // launch per micro-batch chunk and direction.
  bool graphs = false;
};

struct Cluster {
  std::string name, source;  // source: the file, for messages
  int nodes = 1, devices_per_node = 1;
  // CPUs: a node's devices (ranks) share its compute and memory bandwidth,
  // given for the whole node; r ranks on a node get 1/r each.
  bool shared_node = false;
  int devices_per_nic = 1;  // how many devices share one inter-node NIC
  Device device;
  Link intra, inter;  // inter: per NIC; a device gets 1/devices_per_nic of it
  Stack stack;
  double step_overhead_s = 0;  // per optimizer step: what no phase accounts for (loop, logging)
  double data_wait_s = 0;      // per optimizer step: the loader's exposed wait
  int64_t devices() const { return int64_t(nodes) * devices_per_node; }
};

// precision index of Device's arrays: 0 fp32, 1 bf16.
inline int precision_index(const std::string& p) { return p == "bf16" ? 1 : 0; }

Result<Cluster> parse_cluster(const std::string& toml_text, const std::string& source);
Result<Cluster> load_cluster(const std::string& path);
// The TOML text of `c` (what parse_cluster reads back to the same values),
// with `header` as its leading comment lines.
std::string cluster_toml(const Cluster& c, const std::string& header);

// ok when cluster_toml(c) reads back (parse_cluster): every value inside the
// cluster file's bounds. Every writer of a cluster file checks it first.
Status check_cluster(const Cluster& c);

// This machine as a cluster of one node, from a probe document
// (profile/probe.h): devices = hardware threads sharing the node
// (shared_node), the peak = the probe's FMA loop on all threads (f32; bf16
// twice it where oneDNN has a native bf16 matmul), GEMM efficiency from its
// all-thread GEMM rows, memory bandwidth from STREAM triad, the intra link
// from its interconnect section (shared memory) when it has one.
// What the file describes where the probe saw GPUs: the node's GPUs (auto,
// and gpu, which requires the gpu section) or its CPUs (cpu: a CPU run on a
// GPU machine is planned on the CPU's sections).
enum class NodeKind { kAuto, kCpu, kGpu };
Result<Cluster> cluster_from_probe(const nlohmann::json& probe, const std::string& source,
                                   NodeKind kind = NodeKind::kAuto);

}  // namespace crucible::plan
