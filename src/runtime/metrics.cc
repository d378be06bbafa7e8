#include "runtime/metrics.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/file_io.h"
#include "core/json_io.h"

namespace crucible::runtime {

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

Status MetricsWriter::open(const std::string& path, int64_t keep_until,
                           const nlohmann::json& row_at_keep_until) {
  path_ = path;
  std::string kept;
  int64_t last = -1;  // a fine-tuning run's step 0 (the loss before training) is kept
  if (keep_until > 0) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      // A torn last line, or a row that is not ours: dropped, never trusted.
      if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
      const int64_t step = j["step"].get<int64_t>();
      if (step <= keep_until && step > last) {
        kept += line + "\n";
        last = step;
      }
    }
    // The checkpoint was published before its own row reached the file.
    if (last < keep_until && row_at_keep_until.is_object() &&
        json_int_or(row_at_keep_until, "step", -1) == keep_until)
      kept += row_at_keep_until.dump() + "\n";
  }
  CRUCIBLE_RETURN_IF_ERROR(write_file_atomic(path, kept));
  f_ = std::fopen(path.c_str(), "a");
  if (!f_) return Status::io("[run] cannot open " + path + ": " + std::strerror(errno));
  return Status::ok();
}

nlohmann::json to_json(const StepMetrics& m) {
  nlohmann::json j = {
      {"step", m.step},
      {"loss", m.loss},
      {"lr", m.lr},
      {"grad_norm", m.grad_norm},
      {"tokens_per_s", m.tokens_per_s},
      {"mfu", m.mfu},
      {"step_ms", m.step_ms},
      {"data_wait_ms", m.data_wait_ms},
      {"forward_ms", m.forward_ms},
      {"backward_ms", m.backward_ms},
      {"optimizer_ms", m.optimizer_ms},
      {"comm_ms", m.comm_ms},
      {"mem_in_use", m.mem_in_use},
      {"mem_peak", m.mem_peak},
      {"mem_cached", m.mem_cached},
  };
  if (m.mfu_of_gemm >= 0) j["mfu_of_gemm"] = m.mfu_of_gemm;
  if (m.comm_bytes > 0) j["comm_bytes"] = m.comm_bytes;
  if (m.pipeline_wait_ms > 0) j["pipeline_wait_ms"] = m.pipeline_wait_ms;
  if (m.tp_comm_ms > 0) j["tp_comm_ms"] = m.tp_comm_ms;
  if (m.graph_ms > 0) j["graph_ms"] = m.graph_ms;
  if (m.val_loss >= 0) {
    j["val_loss"] = m.val_loss;
    j["eval_ms"] = m.eval_ms;
  }
  if (m.ckpt_stall_ms > 0) {
    j["ckpt_stall_ms"] = m.ckpt_stall_ms;
    j["ckpt_wait_ms"] = m.ckpt_wait_ms;
  }
  if (m.ckpt_write_ms > 0) j["ckpt_write_ms"] = m.ckpt_write_ms;
  if (m.ckpt_flush_ms > 0) j["ckpt_flush_ms"] = m.ckpt_flush_ms;
  if (m.energy_j >= 0) {
    j["energy_j"] = m.energy_j;
    j["power_w"] = m.power_w;
    j["j_per_token"] = m.j_per_token;
  }
  if (m.gpu_power_w >= 0) j["gpu_power_w"] = m.gpu_power_w;
  if (m.gpu_sm_clock_mhz >= 0) j["gpu_sm_clock_mhz"] = m.gpu_sm_clock_mhz;
  if (m.gpu_temp_c >= 0) j["gpu_temp_c"] = m.gpu_temp_c;
  if (m.gpu_throttle >= 0) j["gpu_throttle"] = m.gpu_throttle;
  return j;
}

Status MetricsWriter::write(const nlohmann::json& row) {
  std::string line = row.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    return Status::io("[run] writing " + path_ + ": " + std::strerror(errno));
  return Status::ok();
}

}  // namespace crucible::runtime
