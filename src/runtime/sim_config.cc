#include "runtime/sim_config.h"

#include <cmath>
#include <limits>

#include "core/file_io.h"
#include "runtime/config_schema.h"
#include "runtime/faults.h"

namespace crucible::runtime {

using schema::bad;

std::vector<config::Field> sim_fields(SimConfig& c) {
  std::vector<config::Field> f = {
      {"run.dir", &c.run.dir},
      {"run.name", &c.run.name},
      {"run.seed", &c.run.seed},
      {"run.threads", &c.run.threads},
      {"run.log_every_s", &c.run.log_every_s},
      {"run.trace_from", &c.run.trace_from},
      {"run.trace_steps", &c.run.trace_steps},
      {"ckpt.every", &c.ckpt.every},
      {"ckpt.every_s", &c.ckpt.every_s},
      {"ckpt.keep", &c.ckpt.keep},
      {"fault.hang_timeout_s", &c.fault.hang_timeout_s},
      {"fault.heartbeat_window_s", &c.fault.heartbeat_window_s},
      {"fault.setup_timeout_s", &c.fault.setup_timeout_s},
      {"fault.max_restarts", &c.fault.max_restarts},
      {"fault.restart_backoff_s", &c.fault.restart_backoff_s},
      {"fault.stop_grace_s", &c.fault.stop_grace_s},
      {"fault.inject", &c.fault.inject},
  };
  if (c.kind)
    for (const config::Field& w : c.kind->fields()) f.push_back(w);
  return f;
}

Status validate(const SimConfig& c) {
  if (c.run.name.find('/') != std::string::npos) return bad("run.name", "must be a name without '/'");
  if (c.run.seed > uint64_t(std::numeric_limits<int64_t>::max())) return bad("run.seed", "must be < 2^63");
  if (c.run.threads < 0) return bad("run.threads", "must be >= 0 (0: the cores of this host / its ranks)");
  if (!(c.run.log_every_s > 0)) return bad("run.log_every_s", "must be > 0");
  if (c.run.trace_from < 1) return bad("run.trace_from", "must be >= 1 (a step number)");
  if (c.run.trace_steps < 0) return bad("run.trace_steps", "must be >= 0 (0: no trace)");
  if (c.ckpt.every < 0) return bad("ckpt.every", "must be >= 0 (0: by time only)");
  if (!(c.ckpt.every_s >= 0 && std::isfinite(c.ckpt.every_s)))
    return bad("ckpt.every_s", "must be >= 0 (0: by steps only)");
  if (c.ckpt.keep < 1) return bad("ckpt.keep", "must be >= 1");
  CRUCIBLE_RETURN_IF_ERROR(validate(c.fault));
  {  // kill, hang and slow fire around a step; the checkpoint faults name state.safetensors
    auto faults = parse_faults(c.fault);
    if (!faults) return faults.status();
  }
  return c.kind->validate();
}

Result<SimConfig> parse_sim_config(const std::string& workload, const std::string& toml_text,
                                   const std::string& origin, const std::vector<std::string>& overrides) {
  SimConfig c;
  c.workload = workload;
  c.kind = sim::make_kind(workload);
  if (!c.kind) {
    std::string names;
    for (const std::string& n : sim::kind_names()) names += (names.empty() ? "" : ", ") + n;
    return Status::invalid("[sim] unknown workload '" + workload + "' (workloads: " + names + ")");
  }
  auto root = schema::parse_toml(toml_text, origin);
  if (!root) return root.status();
  CRUCIBLE_RETURN_IF_ERROR(schema::apply_table(sim_fields(c), *root, origin, &c.explicit_keys));
  for (const std::string& o : overrides)
    CRUCIBLE_RETURN_IF_ERROR(schema::apply_override(sim_fields(c), o, &c.explicit_keys));
  if (c.run.name.empty()) c.run.name = workload;
  CRUCIBLE_RETURN_IF_ERROR(validate(c));
  return c;
}

Result<SimConfig> load_sim_config(const std::string& workload, const std::string& path,
                                  const std::vector<std::string>& overrides) {
  if (path.empty()) {
    if (!sim::make_kind(workload)) return parse_sim_config(workload, "", "", overrides);  // names the workloads
    return parse_sim_config(workload, sim::default_config(workload), "<default " + workload + " config>",
                            overrides);
  }
  auto text = read_file(path);
  if (!text) return Status::invalid("[config] " + text.status().message());
  return parse_sim_config(workload, *text, path, overrides);
}

std::string to_toml(const SimConfig& c_in) {
  SimConfig c = c_in;
  return schema::to_toml(sim_fields(c), "# Resolved `crucible sim " + c.workload +
                                            "` configuration (every key, defaults included).\n"
                                            "# Read back, it resolves to itself.\n");
}

nlohmann::json to_json(const SimConfig& c_in) {
  SimConfig c = c_in;
  nlohmann::json j = schema::to_json(sim_fields(c));
  j["workload"] = c.workload;
  return j;
}

}  // namespace crucible::runtime
