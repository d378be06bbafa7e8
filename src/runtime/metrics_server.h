// Live metrics for Prometheus (opt-in: `crucible train --metrics-port P`):
// an HTTP endpoint, http://HOST:P/metrics in the Prometheus text format,
// served by prometheus-cpp (Debian prometheus-cpp-dev) on its own two
// threads (they sleep in accept/poll: no second busy pool). Rank r of a
// data-parallel job serves on port P + r. Gauges, labelled with the run's
// name and the rank, are updated once per step from StepMetrics:
//   crucible_step, crucible_loss, crucible_val_loss, crucible_learning_rate,
//   crucible_tokens_per_second, crucible_mfu,
//   crucible_step_seconds{phase="total|data_wait|forward|backward|comm|optimizer"},
//   crucible_checkpoint_stall_seconds, crucible_memory_bytes{kind="in_use|peak|cached"},
//   crucible_comm_bytes_per_step.
// Thread-safe (prometheus-cpp's gauges are atomic).
#pragma once
#include <memory>
#include <string>

#include "core/status.h"
#include "runtime/metrics.h"

namespace crucible::runtime {

class MetricsServer {
 public:
  // Listens on bind:port (an IPv4 address: 127.0.0.1 by default, 0.0.0.0 for
  // every interface); invalid, naming the address and the OS's reason, when
  // it cannot (a port in use).
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& bind, int port,
                                                      const std::string& run_name, int rank);
  ~MetricsServer();
  void update(const StepMetrics& m);
  int port() const;

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace crucible::runtime
