#include "runtime/run_report.h"

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "core/kernel_stats.h"
#include "profile/report.h"
#include "runtime/memory_estimate.h"

namespace crucible::runtime {

void write_run_report(const std::string& run, const Config& cfg, int world, int rank, const data::LogFn& log) {
  nlohmann::json kernels = nlohmann::json::array();
  const KernelStatsTable& table = kernel_stats();
  for (int c = 0; c < int(KernelClass::count); ++c)
    if (table[size_t(c)].calls > 0)
      kernels.push_back({{"class", kernel_class_name(KernelClass(c))},
                         {"calls", table[size_t(c)].calls},
                         {"flops", table[size_t(c)].flops},
                         {"bytes", table[size_t(c)].bytes},
                         {"seconds", table[size_t(c)].ns * 1e-9}});
  Status k = write_file_atomic(run + "/kernels.json", kernels.dump(1) + "\n");
  if (!k) log("[report] warning: " + k.message());
  const MemoryEstimate est = estimate_memory(cfg, world, rank);
  const nlohmann::json mem = {{"precision", cfg.train.precision},  {"recompute", cfg.train.recompute},
                              {"weights", est.weights},            {"gradients", est.grads},
                              {"optimizer", est.optimizer},        {"activations", est.activations},
                              {"other", est.other},                {"checkpoint_copy", est.snapshot}};
  Status me = write_file_atomic(run + "/memory.json", mem.dump(1) + "\n");
  if (!me) log("[report] warning: " + me.message());
  Status s = profile::write_report(run);
  log(s ? "[report] " + run + "/report.html" : "[report] warning: " + s.message());
}

}  // namespace crucible::runtime
