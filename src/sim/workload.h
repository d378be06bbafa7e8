// sim::Workload: what `crucible sim risk|climate|md` runs. The driver
// (runtime/sim_run.h) owns everything a run shares with training -- the run
// directory and its locks, the console's live line with ETA, metrics.jsonl,
// the trace, checkpoints (ckpt/state_checkpoint.h), supervision under
// `crucible launch`, SIGTERM, the report -- and calls a workload through this
// interface only. A workload owns its numerics and its share of the work
// over the ranks of the Comm it was made with.
//
// A run is total_steps() steps (risk: batches of scenarios; climate and md:
// time steps). Every method marked collective is called by every rank, in
// the same order. Determinism: a workload's result after N steps depends
// only on its config and seed -- not on how the N steps were split by
// checkpoints and restarts; where a workload promises it (risk always, md in
// its reproducible mode) not on the rank or thread count either.
//
// Thread-safety: one thread (the driver's) calls a workload; the workload
// may use OpenMP inside its calls.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace crucible::sim {

// One named array of a workload's state, held whole (gathered over the
// ranks): what a checkpoint stores besides the scalars. dtype is a
// safetensors dtype: "F64", "F32", "I64", "U64", "U8".
struct StateArray {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// A workload's whole state at a step boundary.
struct State {
  nlohmann::json scalars = nlohmann::json::object();
  std::vector<StateArray> arrays;
  const StateArray* find(const std::string& name) const {
    for (const StateArray& a : arrays)
      if (a.name == name) return &a;
    return nullptr;
  }
};

// Packing typed vectors into a State and back. unpack checks the dtype and
// the element count (expect_numel; SIZE_MAX: any) and names the array in
// its corrupt Status: "[sim] checkpoint array 'h': expected 8192 F64
// values, found 4096".
StateArray pack_f64(std::string name, const std::vector<double>& v, std::vector<int64_t> shape = {});
StateArray pack_u64(std::string name, const std::vector<uint64_t>& v, std::vector<int64_t> shape = {});
Status unpack_f64(const State& s, const std::string& name, size_t expect_numel, std::vector<double>* out);
Status unpack_u64(const State& s, const std::string& name, size_t expect_numel, std::vector<uint64_t>* out);

class Workload {
 public:
  virtual ~Workload() = default;
  virtual const char* name() const = 0;  // "risk" | "climate" | "md"
  virtual int64_t total_steps() const = 0;
  virtual int64_t steps_done() const = 0;
  // Collective, once, before the first step() of this process (after load()
  // on a resumed run): opens the workload's output files in run_dir (rank 0;
  // a resumed run cuts them back to the loaded state).
  virtual Status begin(const std::string& run_dir) = 0;
  // Collective: advances one step.
  virtual Status step() = 0;
  // The members of this step's metrics.jsonl row besides "step" and the
  // driver's timings (e.g. {"var_99": 1.2e6, "var_99_se": 3.1e3}). Rank 0's
  // is written.
  virtual nlohmann::json metrics() const = 0;
  // A short fragment for the live line: "VaR99 1.21M ±0.3%".
  virtual std::string progress() const = 0;
  // Collective: the whole state, gathered; meaningful on rank 0 (the others
  // may return an empty State).
  virtual Result<State> save() = 0;
  // Collective: every rank receives the whole state saved at `step` and
  // takes its part. Bad state (wrong shapes for this config) is corrupt.
  virtual Status load(const State& state, int64_t step) = 0;
  // Collective, after the last step: writes the results (RUN/results.json
  // and the workload's own files, rank 0) and returns the summary the report
  // shows (rank 0's is used).
  virtual Result<nlohmann::json> finish(const std::string& run_dir) = 0;
};

}  // namespace crucible::sim
