// The configuration of a `crucible sim WORKLOAD` run: the driver's sections
// [run] [ckpt] [fault] and the workload's own section ([risk], [climate],
// [md]; sim/registry.h), parsed by the one config mechanism
// (runtime/config_schema.h), so unknown keys, wrong types and impossible
// values are one line naming the key, as for `crucible train`. Without a
// config file the workload's embedded default (configs/sim/NAME.toml) is
// used; RUN/config.toml holds the resolved config, which reads back to itself.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/config.h"
#include "sim/registry.h"

namespace crucible::runtime {

struct SimRunConfig {
  std::string dir;   // empty: runs/<name>-<date>-<time>
  std::string name;  // empty: the workload's name
  uint64_t seed = 1;
  int threads = 0;  // per rank; 0: the machine's cores / ranks on this host
  double log_every_s = 5;
  // Chrome trace (RUN/trace.json) of the steps trace_from .. trace_from +
  // trace_steps - 1 (0 steps: no trace).
  int64_t trace_from = 1;
  int64_t trace_steps = 200;
};

struct SimCkptConfig {
  int64_t every = 0;     // steps between checkpoints (0: by time only)
  double every_s = 30;   // wall seconds between checkpoints (0: by steps only)
  int keep = 2;
};

struct SimConfig {
  std::string workload;
  SimRunConfig run;
  SimCkptConfig ckpt;
  FaultConfig fault;
  std::shared_ptr<sim::WorkloadKind> kind;  // holds the workload's own config
  std::vector<std::string> explicit_keys;
};

// Every key, the driver's and the workload's.
std::vector<config::Field> sim_fields(SimConfig& c);
// Reads `path` (empty: the workload's embedded default), applies overrides,
// validates. An unknown workload is invalid, listing the known ones.
Result<SimConfig> load_sim_config(const std::string& workload, const std::string& path,
                                  const std::vector<std::string>& overrides = {});
Result<SimConfig> parse_sim_config(const std::string& workload, const std::string& toml_text,
                                   const std::string& origin, const std::vector<std::string>& overrides = {});
Status validate(const SimConfig& c);
std::string to_toml(const SimConfig& c);
nlohmann::json to_json(const SimConfig& c);

}  // namespace crucible::runtime
