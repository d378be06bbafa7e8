// The steps of writing a checkpoint that checkpoint.cc (one process writes
// it) and checkpoint_writers.cc (several ranks write it) share. Internal to
// the ckpt layer: the public interface is checkpoint.h.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "core/status.h"

namespace crucible::ckpt::detail {

// A file written into a checkpoint: what the manifest lists.
struct FileRecord {
  std::string name;
  uint64_t bytes = 0;
  uint64_t xxh64 = 0;
};

Status validate_snapshot(const Snapshot& snap, int keep);
// Streams a file through XXH64 (seed 0), counting its bytes in
// hashed_bytes(); `label` names it in the I/O error.
Result<uint64_t> hash_file(const std::string& path, const std::string& label);
// A safetensors file streamed through the checkpoint writer: hashed while
// written (its record appended to `records`), failing part-way under an
// injected fault.
Status write_safetensors_file(const std::string& dir, const std::string& label_dir, int64_t step,
                              const std::string& name, const std::vector<TensorView>& tensors,
                              const std::map<std::string, std::string>& metadata,
                              std::vector<FileRecord>& records);
// The snapshot's weights (unless it has none) and moments into tmp_dir
// (named by Snapshot::part and moment_shard), and what they hold of each
// whole tensor for the manifest's "shards": {NAME: {"shape", "slices" (the
// weights'), "moment_slices" (a ZeRO shard's moments)}} (docs/formats.md).
Status write_tensor_files(const std::string& tmp_dir, const std::string& name, const Snapshot& snap,
                          std::vector<FileRecord>& records, nlohmann::ordered_json& tensors);
// The manifest, listing `records` (every file written before it), with the
// "shards" member when given, then the directory's fsync.
Status write_manifest(const std::string& tmp_dir, const std::string& name, const Snapshot& snap,
                      const std::vector<FileRecord>& records, const nlohmann::ordered_json* shards = nullptr);
// Creates ckpt_dir (durably) and an empty ckpt_dir/name.tmp, after clearing
// the leftovers of an interrupted write or delete.
Status make_step_tmp(const std::string& ckpt_dir, const std::string& name);
// tmp_dir holds a complete checkpoint (st: how writing it went): read it
// back, rename it into place, update latest, prune; on failure tmp_dir is
// removed and nothing else has changed.
Status publish_step_dir(const std::string& ckpt_dir, const std::string& tmp_dir, const std::string& name,
                        int64_t step, int keep, Status st);
// A writer other than the publisher (checkpoint_writers.cc).
Status write_part(const std::string& ckpt_dir, const Snapshot& snap);

}  // namespace crucible::ckpt::detail
