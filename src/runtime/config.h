// The run configuration: one TOML file (configs/*.toml) with the sections
// [model] [data] [train] [optim] [ckpt] [run] [dist] [fault] [init], any key overridable with
// `--set section.key=value`. Every key is declared once in a schema
// (config.cc); parsing, overrides, validation, and writing the resolved config
// all walk that schema, so a key cannot be known to one and not the others.
// Unknown keys, wrong types and impossible values are Status errors whose
// message names the key ("[config] model.n_embd: 250 is not divisible by ...").
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/curate.h"
#include "nn/gpt.h"
#include "parallel/layout.h"

namespace crucible::runtime {

struct DataConfig {
  // Corpus files or directories; read when no prepared dataset is given.
  std::vector<std::string> source = {"/usr/share/games/fortunes"};
  std::string format = "fortunes";  // auto | fortunes | text | jsonl
  // A prepared dataset directory (from `crucible tokenize`); overrides source.
  std::string dataset;
  // Where datasets prepared from `source` are cached, keyed by their inputs.
  std::string cache_dir = "data";
  double val_fraction = 0.05;  // share of the token stream held out for validation
  // Tokenizer vocabulary; 0: model.vocab_size. Smaller than the model's is
  // padding (as GPT-2's 50257 -> 50304): the extra embedding rows go unused.
  int vocab_size = 0;
  // A directory whose tokenizer the dataset uses instead of training one
  // (tokenizer.model, or GPT-2's vocab.json + merges.txt): an imported run
  // sets its own directory (docs/interchange.md). Empty: train SentencePiece.
  std::string tokenizer;
};

struct TrainConfig {
  int64_t steps = 260;
  int batch_size = 8;  // sequences per micro-batch (per rank)
  int grad_accum = 1;  // micro-batches per optimizer step
  uint64_t seed = 1337;
  int64_t eval_every = 65;  // 0: only at the end
  int eval_batches = 8;
  int threads = 0;  // 0: all cores
  // What one rank may use, in GB (10^9 bytes) of the up-front estimate
  // (runtime/memory_estimate.h); 0: only the machine's memory limits it.
  double memory_limit_gb = 0;
  // "fp32" | "bf16": bf16 GEMM operands and stored activations, f32 master
  // weights, moments and accumulation (docs/training.md, "Precision").
  std::string precision = "fp32";
  // "none" | "selective" | "full": what backward recomputes instead of
  // keeping from forward (docs/training.md, "Recomputation").
  std::string recompute = "none";
  // The LM head and loss fused over chunks of rows, so a micro-batch's
  // (B,T,V) logits are never stored (nn::GPTPart::head_chunk).
  bool fused_head = false;
};

struct OptimConfig {
  double lr = 2e-3;
  double weight_decay = 0.1;
  int64_t warmup_steps = 26;
  double grad_clip = 1.0;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double min_lr_ratio = 0.1;  // cosine decay floor, as a fraction of lr
  std::string moments = "f32";  // "f32" | "bf16": AdamW's moments' storage (optim/adamw.h)
};

struct CkptConfig {
  int64_t every = 100;  // 0: only at the end
  int keep = 3;
};

struct RunConfig {
  std::string dir;  // empty: runs/<config name>-<date>-<time>
  std::string name = "tiny";
  double log_every_s = 5;  // plain progress lines when stderr is not a terminal
  int sample_tokens = 64;  // generated after training (0: none)
  // Chrome trace (RUN/trace.json) of trace_steps steps from step trace_from
  // on, every rank (0 steps: no trace).
  int64_t trace_from = 3;
  int64_t trace_steps = 3;
  // A probe.json older than this is not consulted; the run measures this
  // machine instead (profile/local_probe.h).
  double probe_max_age_days = 30;
  // Where the step runs: "cpu", or a GPU, "cuda" (= "cuda:0") or "cuda:N"
  // (docs/gpu.md). Checked before anything is written (runtime/device_check.h).
  std::string device = "cpu";
  // On a GPU, one rank: the steady-state step captured once as a CUDA graph
  // and replayed (kernels/step_graph.h; docs/gpu.md); false: every step's
  // kernels launched one by one. Ignored on the CPU.
  bool cuda_graphs = true;
};

struct DistConfig {
  double bucket_mb = 25;      // gradient bucket size for the overlapped allreduce
  int zero = 0;               // 0: replicated optimizer; 1: sharded state; 2: + sharded gradients
  bool reproducible = false;  // bit-identical weights for any world size (docs/training.md)
  bool overlap = true;        // start bucket reductions during backward (false: after it)
  // With overlap, data parallel and one pipeline stage: the tied wte's
  // embedding rows reduced apart from its LM-head gradient where that moves
  // fewer bytes (parallel/embedding_rows.h); false: wte reduced whole.
  bool embedding_rows = true;
  // The model-parallel grid (parallel/layout.h): tensor-parallel ranks,
  // pipeline stages, virtual stages per rank, pipeline schedule. The
  // micro-batches of a pipeline step are train.grad_accum.
  int tp = 1, pp = 1, pp_virtual = 1;
  std::string pp_schedule = "1f1b";
  std::string pp_split = "even";  // "even" | "cost" (parallel/layout.h)
  // With tp > 1: the LayerNorm regions sharded along the sequence
  // (nn/tensor_parallel.h); nothing at tp = 1.
  bool sequence_parallel = false;
  // "f32" | "bf16": the data-parallel gradients on the wire (bf16: half the
  // bytes, summed in f32; parallel/data_parallel.h).
  std::string grad_dtype = "f32";
  // Ranks on GPUs: let more ranks than a host has GPUs share them (their
  // collectives staged through host memory; for testing layouts on few GPUs).
  bool share_gpus = false;
};

// Supervision by `crucible launch` (docs/fault_tolerance.md).
struct FaultConfig {
  // A rank whose progress (step and phase) has not changed for this long is
  // hung; the supervisor stops the job and restarts it.
  double hang_timeout_s = 300;
  // The same, before the first training step (dataset and tokenizer
  // preparation may legitimately take long).
  double setup_timeout_s = 1800;
  // A rank whose heartbeats (sent every 200 ms by a thread of their own,
  // whatever training does) stop arriving for this long is gone: its
  // process, or its host or the link to it (the supervisor asks which).
  double heartbeat_window_s = 3;
  int max_restarts = 3;            // relaunches after failures; then exit 4
  double restart_backoff_s = 1;    // wait before the first relaunch; doubles, at most 60 s
  int shrink_after = 2;            // consecutive failures at one world size before --min-ranks shrinks it
  double stop_grace_s = 120;       // SIGTERM -> checkpoint: how long before the job is killed
  // Test facility (docs/fault_tolerance.md, "Fault injection"):
  // "KIND@STEP[:key=value]...", KIND in kill, hang, ckpt_write_error, ckpt_corrupt.
  std::vector<std::string> inject;
};

// Curation: `crucible curate`, and `crucible train` before it tokenizes
// data.source when curate.enabled (docs/curation.md). The thresholds live in
// the [curate.quality] [curate.repetition] [curate.c4] [curate.near] tables.
struct CurateConfig : data::CurateSettings {
  bool enabled = false;  // train: curate data.source first (the embedded default does)
  // Threshold defaults: "web" (Gopher's, for web pages), "short" (relaxed for
  // short documents such as fortunes), "auto" (short when the corpus is in
  // fortunes format, else web). Keys set explicitly win over the profile.
  std::string profile = "auto";
};

// Fine-tuning (docs/training.md, "Fine-tuning"): the weights and tokenizer a
// fresh run starts from (runtime/init_source.h). The model's shape, the
// tokenizer and data.vocab_size then come from the source; the optimizer
// starts fresh at step 0 with this config's own schedule.
struct InitConfig {
  // A crucible run directory (its newest valid checkpoint) or a Hugging Face
  // GPT-2 directory; empty: random initialisation. Written absolute.
  std::string from;
};

struct Config {
  nn::GPTConfig model;
  InitConfig init;
  DataConfig data;
  TrainConfig train;
  OptimConfig optim;
  CkptConfig ckpt;
  RunConfig run;
  DistConfig dist;
  FaultConfig fault;
  CurateConfig curate;
  data::GopherQualityParams quality;
  data::GopherRepetitionParams repetition;
  data::C4Params c4;
  data::MinHashParams near;
  // Keys the file or --set gave explicitly (profiles leave these alone).
  std::vector<std::string> explicit_keys;
};

// The profile "auto" stands for on these inputs: "short" when any of them is in
// fortunes format (by data.format or, for "auto", by looking), else "web".
Result<std::string> detect_curate_profile(const std::vector<std::string>& inputs,
                                          const std::string& format);

// Resolves what a training config leaves to be decided from its inputs: with
// curate.enabled and no data.dataset, curate.profile "auto" becomes the
// detected profile, and the profile's thresholds fill every key not set. The
// result written by to_toml and read back resolves to itself (a fixed point:
// every key is then explicit and the profile is no longer "auto").
Status resolve_config(Config& cfg);

// Applies a curation profile's threshold defaults ("web": none, the C++
// defaults are Gopher's; "short": docs/curation.md) to every key not in
// cfg.explicit_keys, then validates.
Status apply_curate_profile(Config& cfg, const std::string& profile);

// The built-in default (configs/tiny.toml, embedded at build time).
const char* default_config_toml();

// Parses TOML text; `origin` names it in messages (a path or "<default>").
// overrides are "section.key=value" strings applied after the file.
Result<Config> parse_config(const std::string& toml_text, const std::string& origin,
                            const std::vector<std::string>& overrides = {});
// Reads `path` (empty: the built-in default) and applies overrides.
Result<Config> load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// Checks every value; the first problem is returned, naming its key.
Status validate(const Config& cfg);
// The [fault] keys (training's and `crucible sim`'s).
Status validate(const FaultConfig& fault);
// The [dist] keys of the model-parallel grid.
parallel::LayoutSpec layout_spec(const Config& cfg);

// The resolved config: TOML (written to RUN/config.toml; parse_config reads it
// back to the same Config) and JSON (stored in checkpoint manifests).
std::string to_toml(const Config& cfg);
nlohmann::json to_json(const Config& cfg);

}  // namespace crucible::runtime
