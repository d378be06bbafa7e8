// metrics.jsonl: one JSON object per optimizer step (docs/training.md, "metrics.jsonl"),
// and for a fine-tuning run (init.from) a first row of step 0: the validation
// loss before training.
// On resume the file is cut back to the checkpoint's step, so a resumed run's
// file reads as if it had never stopped. Each line is flushed as written.
#pragma once
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace crucible::runtime {

struct StepMetrics {
  int64_t step = 0;  // optimizer steps completed, counting this one
  double loss = 0, lr = 0, grad_norm = 0;
  double tokens_per_s = 0;
  // Model FLOPs utilisation (PaLM: 6N + 12·L·C·T FLOPs per token) against the
  // CPU's derived FMA peak, and against the probe's best measured f32 GEMM
  // (probe.json; < 0 when there is none): what the step could reach here.
  double mfu = 0, mfu_of_gemm = -1;
  // Wall time of the step and its parts (ms). The parts sum to slightly less
  // than step_ms; the rest is loop overhead.
  double step_ms = 0, data_wait_ms = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  // Exposed communication: time the step waited for gradient reductions and
  // the parameter all-gather (data parallel only; overlapped time not counted).
  double comm_ms = 0;
  // Bytes this rank moved for gradients and parameters by the ring
  // algorithm's count (data parallel; 0 otherwise).
  double comm_bytes = 0;
  // Pipeline parallel: time blocked in the schedule's receives and final send
  // waits (the bubble as this rank saw it; 0 without a pipeline). Part of
  // forward/backward's wall time is not in it: it is between them.
  double pipeline_wait_ms = 0;
  // Tensor parallel: time in the TP group's collectives (inside forward and
  // backward's wall time; nothing overlaps them, so all of it is exposed).
  double tp_comm_ms = 0;
  // A step replayed from a CUDA graph (kernels/step_graph.h): launch to the
  // read-back, the device's whole step; forward, backward and optimizer are
  // its parts by the graph's own events (0 in an unsplit graph's steps:
  // profile/run_schema.h row_has_parts). 0: launched kernel by kernel.
  double graph_ms = 0;
  double val_loss = -1;                   // < 0: not an evaluation step
  double eval_ms = 0;                     // outside step_ms
  // Checkpoints (outside step_ms): what the loop paid for a save (snapshot,
  // plus waiting for the previous save: ckpt_wait_ms of it), the background
  // write of the save collected at this step, and the wait for the last save
  // of a run to reach the disk.
  double ckpt_stall_ms = 0, ckpt_wait_ms = 0, ckpt_write_ms = 0, ckpt_flush_ms = 0;
  uint64_t mem_in_use = 0, mem_peak = 0, mem_cached = 0;  // allocator bytes
  // Energy over step_ms from the device's own counter (runtime/step_energy.h:
  // RAPL's packages on a CPU, the board's NVML counter on a GPU), summed over
  // the job's hosts or GPUs; < 0: not measurable here. power_w = energy_j /
  // step_ms, j_per_token = energy_j / the step's tokens.
  double energy_j = -1, power_w = -1, j_per_token = -1;
  // A GPU's state at the step's end (NVML; < 0 unread): board power, SM
  // clock, temperature, and the clock-throttle reason bits
  // (profile::throttle_names).
  double gpu_power_w = -1, gpu_sm_clock_mhz = -1, gpu_temp_c = -1;
  int64_t gpu_throttle = -1;
};

// One row of metrics.jsonl.
nlohmann::json to_json(const StepMetrics& m);

class MetricsWriter {
 public:
  ~MetricsWriter();
  // Opens `path` for appending after dropping every line whose step > keep_until
  // (keep_until = 0: start a fresh file), every unreadable line and every
  // repeated step. When no row for keep_until remains, row_at_keep_until (the
  // checkpoint's copy of it) is put back.
  Status open(const std::string& path, int64_t keep_until,
              const nlohmann::json& row_at_keep_until = nullptr);
  Status write(const StepMetrics& m) { return write(to_json(m)); }
  // Any row with an integer "step" (`crucible sim`'s rows).
  Status write(const nlohmann::json& row);

 private:
  std::string path_;
  FILE* f_ = nullptr;
};

}  // namespace crucible::runtime
