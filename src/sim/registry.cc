#include "sim/registry.h"

#include <map>

#include "sim/climate/climate.h"
#include "sim/climate/climate_config.h"
#include "sim/md/md.h"
#include "sim/md/md_config.h"
#include "sim/risk/risk.h"
#include "sim/risk/risk_config.h"

namespace crucible::sim {

namespace {

#include "sim_default_configs.inc"  // kSimDefaultConfigs: configs/sim/*.toml, embedded

using Factory = std::unique_ptr<WorkloadKind> (*)();

// The workloads, in the order they are listed.
const std::vector<std::pair<std::string, Factory>>& kinds() {
  static const std::vector<std::pair<std::string, Factory>> k = {
      {"risk",
       [] {
         return std::unique_ptr<WorkloadKind>(
             new KindOf<risk::RiskConfig>("risk", risk::risk_fields, risk::validate_risk, make_risk_workload));
       }},
      {"climate",
       [] {
         return std::unique_ptr<WorkloadKind>(
             new KindOf<ClimateConfig>("climate", climate_fields, validate_climate, make_climate_workload));
       }},
      {"md",
       [] { return std::unique_ptr<WorkloadKind>(new KindOf<MdConfig>("md", md_fields, validate_md, make_md_workload)); }},
  };
  return k;
}

}  // namespace

std::unique_ptr<WorkloadKind> make_kind(const std::string& name) {
  for (const auto& [n, make] : kinds())
    if (n == name) return make();
  return nullptr;
}

std::vector<std::string> kind_names() {
  std::vector<std::string> names;
  for (const auto& [n, make] : kinds()) names.push_back(n);
  return names;
}

std::string default_config(const std::string& name) {
  for (const auto& [n, text] : kSimDefaultConfigs)
    if (name == n) return text;
  return "";
}

}  // namespace crucible::sim
