#include "ckpt/state_checkpoint.h"

#include "ckpt/checkpoint_internal.h"

namespace crucible::ckpt {

Status write_state_checkpoint(const std::string& ckpt_dir, const CheckpointState& state,
                              const std::vector<TensorView>& arrays, int keep) {
  if (keep < 1) return Status::invalid("[ckpt] keep must be >= 1");
  if (state.step < 0) return Status::invalid("[ckpt] a checkpoint's step must be >= 0");
  const std::string name = step_dir_name(state.step);
  CRUCIBLE_RETURN_IF_ERROR(detail::make_step_tmp(ckpt_dir, name));
  const std::string tmp_dir = ckpt_dir + "/" + name + ".tmp";
  Snapshot snap;  // the manifest's members; no model, no moments
  snap.state = state;
  std::vector<detail::FileRecord> records;
  Status st = detail::write_safetensors_file(tmp_dir, name, state.step, kStateFile, arrays, {}, records);
  if (st) st = detail::write_manifest(tmp_dir, name, snap, records);
  return detail::publish_step_dir(ckpt_dir, tmp_dir, name, state.step, keep, st);
}

Result<LoadedState> load_state_checkpoint(const FoundCheckpoint& found) {
  auto file = read_safetensors(found.dir + "/" + kStateFile);
  if (!file)
    return Status::corrupt("[ckpt] " + found.dir + " is not a simulation checkpoint: " + file.status().message());
  return LoadedState{found.state, std::move(*file)};
}

}  // namespace crucible::ckpt
