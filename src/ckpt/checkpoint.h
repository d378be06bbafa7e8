// Training checkpoints: everything needed to resume a run bit-identically.
// ckpt_dir/step_NNNNNNN/ holds model.safetensors (weights, HF GPT-2 names),
// optimizer.safetensors (AdamW moments) and manifest.json (step, config, world,
// loader position, RNG state, every file's size and xxh64, and a checksum of
// the manifest itself); ckpt_dir/latest names the newest one. Format and write
// sequence: docs/formats.md, "Training checkpoints".
//
// Invariants: a step_* directory appears only complete and verified (written
// as step_NNNNNNN.tmp, fsync'ed, read back and checked, renamed); `latest` and
// older checkpoints are untouched by a failed write; readers verify every byte
// before using it.
//
// Saving is split in two so it can run off the training thread: take_snapshot
// copies the flat buffers to host memory at a step boundary, write_checkpoint
// writes a Snapshot and touches nothing else (ckpt/async_writer.h runs it on
// a background thread). Functions are thread-compatible: any number may run at
// once on different ckpt_dirs; one writer per ckpt_dir.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "nn/params.h"
#include "optim/adamw.h"

namespace crucible::ckpt {

// The small state of a run, stored in manifest.json. The JSON members are
// opaque to this layer: each owner (config, data loader, RNG) writes and reads
// its own.
struct CheckpointState {
  int64_t step = 0;                            // optimizer steps completed
  nlohmann::json config;                       // resolved run config (object)
  nlohmann::json loader;                       // data-loader position
  nlohmann::json rng;                          // RNG state
  nlohmann::json world = {{"world_size", 1}};  // parallel layout
  nlohmann::json data;                         // what it was trained on (runtime/resume_check.h)
  // The metrics.jsonl row of this step: the checkpoint can be published
  // before the row reaches the file, and a resume restores it from here.
  nlohmann::json metrics;
  // A simulation workload's own scalars (ckpt/state_checkpoint.h).
  nlohmann::json sim;
  // Where a fine-tuning run's step-0 weights came from (runtime/init_source.h).
  nlohmann::json init;
};

// Host copy of what one rank writes of a checkpoint, taken at a step
// boundary. params is the whole flat buffer (ParamRegistry layout, padding
// included), or empty when this rank writes no weights (a ZeRO rank other
// than its part's first data-parallel rank); specs say where each tensor
// lives in it. exp_avg / exp_avg_sq are the moments of moment_ranges (flat-
// buffer element ranges, ascending) concatenated: the whole buffer, or
// under ZeRO this rank's shard of it.
//
// File names: part >= 0 is one part of the model (a pipeline stage's
// tensor-parallel shard: model.part-K.safetensors) with its own tensors only
// (its replicas are another part's), in its sharded shapes; moment_shard >= 0
// names the moments' file by the rank's ZeRO shard (optimizer.dp-R...,
// optimizer.part-K.dp-R...). writer >= 0: one of `writers` ranks, 0 ..
// writers - 1, writing one checkpoint together, each its own files, rank 0
// publishing (below); -1: one process writes it all.
struct Snapshot {
  CheckpointState state;
  std::vector<nn::ParamSpec> specs;
  std::vector<float> params;
  std::vector<optim::Range> moment_ranges;
  std::vector<float> exp_avg, exp_avg_sq;
  int64_t adam_steps = 0;
  int part = -1;
  int moment_shard = -1;
  int writer = -1;
  int writers = 1;
};

// Copies into `into`, reusing its buffers' capacity (the first snapshot pays
// the page faults of fresh memory, later ones are plain memcpy), and leaves
// its file naming and writer fields alone. weights = false: no params (a
// rank that writes moments only).
void take_snapshot(const CheckpointState& state, const nn::ParamRegistry& params,
                   const optim::AdamW& opt, Snapshot& into, bool weights = true);
Snapshot take_snapshot(const CheckpointState& state, const nn::ParamRegistry& params,
                       const optim::AdamW& opt);

// Writes ckpt_dir/step_NNNNNNN/ (step zero-padded to 7 digits), reads every
// file back from disk and checks it against the manifest (sizes and xxh64)
// before publishing it, updates ckpt_dir/latest, then keeps only the `keep`
// newest checkpoints (keep >= 1).
// Checkpoints with a step above snap's come from a timeline the run has left
// (it resumed from an older one) and are removed, so a resume cannot jump back
// to them. A directory for the same step is replaced. On failure (a failed
// read-back included): the .tmp directory is removed, `latest` and existing
// checkpoints are untouched, and the Status (io) names the file and the OS
// error or the mismatch.
Status write_checkpoint(const std::string& ckpt_dir, const Snapshot& snap, int keep);

// ---- Checkpoints several ranks write (pipeline, tensor parallelism, ZeRO) ----
// Each part of the model (a pipeline stage's tensor-parallel shard) is one
// model file, model.part-K.safetensors, of its own tensors under the whole
// model's names, in the part's shapes; its moments are optimizer.part-K.
// safetensors, or under ZeRO one file per data-parallel rank holding that
// rank's shard (optimizer[.part-K].dp-R.safetensors), so no rank ever
// gathers the whole model or optimizer. The manifest's "shards" member maps
// every whole tensor to the slices of it each file holds (docs/formats.md).
// Every writer writes its files in parallel, in the background, reads them
// back, and leaves a receipt (writer-N.receipt: its files' sizes and xxh64
// and its slices, or its error); the publisher (rank 0) waits for every
// receipt, then writes the manifest and publishes as write_checkpoint does.
//
// The sequence: the publisher's begin_sharded_checkpoint (on the training
// thread, before any rank writes), then every writer's write_checkpoint
// (which dispatches on Snapshot::writer). Writers share the checkpoint
// directory (one file system: one machine, or storage every host mounts).
Status begin_sharded_checkpoint(const std::string& ckpt_dir, int64_t step);
// The publisher's wait for receipts polls `cancelled` (the job is ending),
// and gives up after `timeout_s`.
Status publish_sharded_checkpoint(const std::string& ckpt_dir, const Snapshot& snap, int keep,
                                  const std::function<bool()>& cancelled, double timeout_s = 600);

// Checks one checkpoint directory: the manifest parses, its checksum matches,
// it records the directory's step, and every listed file exists with the
// listed size and xxh64. The error names the file and the problem, e.g.
// "[ckpt] step_0000020/model.safetensors: checksum mismatch".
Status verify_checkpoint(const std::string& step_dir);
// The same checks for a directory whose name is not its step: the writer's
// step_NNNNNNN.tmp, read back from disk before it is published. The manifest
// must record `expected_step`.
Status verify_checkpoint(const std::string& dir, int64_t expected_step);

struct FoundCheckpoint {
  std::string dir;  // ckpt_dir/step_NNNNNNN
  int64_t step = 0;
  // One line per newer checkpoint skipped as invalid, naming the file.
  std::vector<std::string> warnings;
  CheckpointState state;  // from its manifest

};

// How the ranks of a job share the verification of a checkpoint: each
// manifest's files are dealt out by size, largest first, each to the rank
// with the fewest bytes so far, and rank r hashes its own (all ranks parse
// the manifest and check every file's size), so every byte is read once
// per job rather than once per rank, about total / ranks bytes a rank. The hooks are collective
// (runtime/world.h verify_share): `agree` turns each rank's verdict into the
// job's (the first failure, with its message, on every rank) and
// `broadcast` gives every rank rank 0's text.
struct VerifyShare {
  int rank = 0, ranks = 1;
  std::function<Status(const Status&)> agree;
  std::function<Status(std::string&)> broadcast;
};

// The newest valid checkpoint in ckpt_dir. Every step_* directory counts,
// newest first (`latest` is for users and tools: a complete directory newer
// than it, left by a crash between the rename and the update, is used).
// not_found when ckpt_dir is missing or holds no checkpoint; corrupt (naming
// every problem) when checkpoints exist but none is valid, so a run does not
// silently start over.
// With a share, collective: every rank of it calls it and gets the same
// answer (rank 0's list of checkpoints, the verdicts agreed).
Result<FoundCheckpoint> find_latest_valid(const std::string& ckpt_dir, const VerifyShare* share = nullptr);

// Verifies step_dir (verified: find_latest_valid just did, so the manifest
// is checked again but the files' hashes are not), then loads the weights
// (names and shapes must match the model; part: `params` is a part of it, a
// pipeline stage or tensor-parallel shard, and loads its tensors only; from
// a sharded checkpoint each tensor is assembled from the slices that overlap
// it, reading only their files) and, if opt is non-null, the AdamW moments
// and step count. Returns the state from the manifest. On error params / opt
// may be partly overwritten; the caller must not train from them.
Result<CheckpointState> load_checkpoint(const std::string& step_dir, nn::ParamRegistry& params,
                                        optim::AdamW* opt, bool part = false, bool verified = false);

// Test facility (also behind the trainer's `fault.inject`): the next
// write_checkpoint for `step` fails while writing `file` (e.g.
// "optimizer.safetensors") after writing part of it, as a full disk would,
// with "injected write error (fault.inject)". Cleared once it fires.
// Thread-safe.
void inject_checkpoint_write_fault(int64_t step, std::string file);

// When an injected corruption strikes.
enum class CorruptAt {
  kAfterPublish,  // in step_NNNNNNN once `latest` names it: readers must skip it
  kBeforeVerify,  // in step_NNNNNNN.tmp between the write and the read-back:
                  // write_checkpoint must fail and publish nothing
};

// Test facility (behind fault.inject "ckpt_corrupt@STEP[:file=F]"): after the
// checkpoint of `step` is written, verified and published, flips one byte in
// the middle of `file` in place, as storage corruption would; readers must
// then skip it. With CorruptAt::kBeforeVerify the byte is flipped in the .tmp
// directory before the read-back instead, so the write fails. Fires only when
// the checkpoint has `file`; cleared once it fires; several may be armed.
// Thread-safe.
void inject_checkpoint_corruption(int64_t step, std::string file = "model.safetensors",
                                  CorruptAt at = CorruptAt::kAfterPublish);

// ---- Format helpers, shared by the writer, the reader and tools ----

// "model.safetensors" (part < 0: the whole model's), "model.part-3.safetensors".
std::string part_file_name(const std::string& kind, int part);
// The moments' file: part_file_name("optimizer", part), or of ZeRO shard
// moment_shard >= 0: "optimizer.dp-1.safetensors", "optimizer.part-3.dp-1.safetensors".
std::string moments_file_name(int part, int moment_shard);
// "step_0000020" for step 20; parse_step_dir_name accepts only that spelling.
std::string step_dir_name(int64_t step);
std::optional<int64_t> parse_step_dir_name(const std::string& name);
// The step_* directories of ckpt_dir, newest first (none when it is missing).
Result<std::vector<std::pair<int64_t, std::string>>> list_checkpoints(const std::string& ckpt_dir);
// 16 lowercase hex digits.
std::string xxh64_hex(uint64_t h);
// The manifest's self-checksum is XXH64 (seed 0) of manifest.json's bytes with
// the 16 digits of its value written as zeros; the member is the manifest's
// last. Returns the offset of those digits in `text` when the member holds
// `recorded`, else npos.
inline constexpr const char* kManifestChecksumKey = "manifest_xxh64";
size_t manifest_checksum_pos(const std::string& text, const std::string& recorded);

namespace detail {
// Bytes this process has hashed to verify checkpoint files (tests: each
// byte once per job under a VerifyShare).
uint64_t hashed_bytes();
}  // namespace detail

}  // namespace crucible::ckpt
