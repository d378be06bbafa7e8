// The workloads `crucible sim` knows, by name, each with its config object
// (its keys as config::Fields, so runtime's one config mechanism parses them),
// its validation, its embedded default config (configs/sim/NAME.toml) and its
// factory. A WorkloadKind owns one config object; fields() point into it.
// Not thread-safe (a kind is configured, then used by one thread).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "core/config_field.h"
#include "core/status.h"
#include "sim/workload.h"

namespace crucible::sim {

class WorkloadKind {
 public:
  virtual ~WorkloadKind() = default;
  virtual const char* name() const = 0;
  // Every key of the workload's config, bound to this kind's config object.
  virtual std::vector<config::Field> fields() = 0;
  virtual Status validate() const = 0;
  // The workload for this config: bad input is Status::invalid, and nothing
  // has been written. Collective over comm.
  virtual Result<std::unique_ptr<Workload>> make(comm::Comm& comm, uint64_t seed) const = 0;
};

// A kind from its config type and three functions.
template <typename Config>
class KindOf final : public WorkloadKind {
 public:
  using Fields = std::vector<config::Field> (*)(Config&);
  using Validate = Status (*)(const Config&);
  using Make = Result<std::unique_ptr<Workload>> (*)(const Config&, comm::Comm&, uint64_t);
  KindOf(const char* name, Fields fields, Validate validate, Make make)
      : name_(name), fields_(fields), validate_(validate), make_(make) {}
  const char* name() const override { return name_; }
  std::vector<config::Field> fields() override { return fields_(config_); }
  Status validate() const override { return validate_(config_); }
  Result<std::unique_ptr<Workload>> make(comm::Comm& comm, uint64_t seed) const override {
    return make_(config_, comm, seed);
  }
  Config& config() { return config_; }

 private:
  const char* name_;
  Fields fields_;
  Validate validate_;
  Make make_;
  Config config_;
};

// A fresh kind with the config type's defaults; null for an unknown name.
std::unique_ptr<WorkloadKind> make_kind(const std::string& name);
// The names make_kind knows, in the order `crucible sim --help` lists them.
std::vector<std::string> kind_names();
// The embedded configs/sim/NAME.toml (what `crucible sim NAME` runs without
// a config file); empty when there is none.
std::string default_config(const std::string& name);

}  // namespace crucible::sim
