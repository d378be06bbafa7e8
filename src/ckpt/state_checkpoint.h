// Checkpoints of a state that is not a model: named arrays (any safetensors
// dtype) and JSON, as `crucible sim` workloads hold (sim/workload.h). The
// same directory format, write sequence and guarantees as training
// checkpoints (ckpt/checkpoint.h; docs/formats.md): ckpt_dir/step_NNNNNNN/
// holds state.safetensors and manifest.json (step, config, world, the
// workload's scalars under "sim", every file's size and xxh64, the
// manifest's own checksum); written as .tmp, fsync'ed, read back, renamed;
// `latest` updated; the `keep` newest kept. find_latest_valid and
// verify_checkpoint read these directories as they read training ones.
// Thread-compatible, like checkpoint.h.
#pragma once
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "core/status.h"

namespace crucible::ckpt {

inline constexpr const char* kStateFile = "state.safetensors";

// Writes ckpt_dir/step_<state.step>/ with `arrays` (names unique; they may
// be empty, then the file holds none). Failure leaves `latest` and older
// checkpoints as they were, and the Status (io) names the file.
Status write_state_checkpoint(const std::string& ckpt_dir, const CheckpointState& state,
                              const std::vector<TensorView>& arrays, int keep);

struct LoadedState {
  CheckpointState state;
  SafetensorsFile arrays;
};

// Reads the arrays of a checkpoint find_latest_valid found (and so verified:
// every file's size and hash against its manifest, whose state `found`
// holds). A training checkpoint is corrupt, naming it.
Result<LoadedState> load_state_checkpoint(const FoundCheckpoint& found);

}  // namespace crucible::ckpt
