// GPT: exactly the GPT-2 architecture (learned positions, pre-LayerNorm with
// eps 1e-5, biases on every linear, GELU tanh, tied embedding / LM head,
// init N(0, 0.02) with residual projections scaled by 1/sqrt(2 n_layer)).
//
// Owns the ParamRegistry (one flat buffer for parameters, one for gradients)
// of the part of the model it holds (GPTPart: all of it, or a pipeline
// stage's chunks). Activations come from the caller's arenas; forward saves
// what backward needs there (Activations). The model knows nothing of
// parallelism: what crosses a stage boundary is handed to and taken from the
// caller (parallel/pipeline.h). Not thread-safe.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/device_scalars.h"
#include "nn/layers.h"
#include "nn/params.h"
#include "nn/tensor_parallel.h"

namespace crucible::nn {

struct GPTConfig {
  int n_layer = 4;
  int n_head = 4;
  int n_embd = 256;
  int vocab_size = 8192;
  int seq_len = 256;  // maximum T (rows of wpe)

  Status validate() const;
  // N of the PaLM FLOP count: every parameter except the position table
  // (biases and LayerNorms included; they are <0.2% of it).
  int64_t matmul_params() const;
  // Training FLOPs per token: 6 N + 12 L C T (PaLM), N = matmul_params().
  double flops_per_token(int T) const;
};

// Blocks [first, last) of the model: one model chunk.
struct BlockRange {
  int first = 0, last = 0;
};

// The part of the model one GPT object holds, for pipeline stages (the layout
// decides it from outside, parallel/pipeline.h): its model chunks (ascending,
// disjoint, non-empty block ranges), whether it holds the embedding (wte and
// wpe: its first chunk then starts the model at block 0) and whether it holds
// the head (ln_f, the tied LM head and the loss: its last chunk then ends the
// model). A head without the embedding holds its own copy of the tied wte,
// registered as a replica (ParamSpec::replica): its gradient is summed with
// the embedding's copy between stages and counted once in the norm.
// Parameter names and initial values are the whole model's.
//
// tp > 1: the part is rank tp_rank's shard of those layers
// (nn/tensor_parallel.h says what it holds); shapes are the shard's, and
// each ParamSpec says which part of the whole tensor it is.
//
// sequence_parallel (tp > 1): the residual stream, LayerNorms and the
// boundaries between stages hold this rank's B*T/tp rows (nn/tensor_parallel.h).
//
// precision bf16 (train.precision): the activations GEMMs read are bf16 and
// the parameters get a bf16 working copy (nn/layers.h); f32 master weights.
struct GPTPart {
  std::vector<BlockRange> chunks;
  bool embedding = true, head = true;
  int tp = 1, tp_rank = 0;
  bool sequence_parallel = false;
  DType precision = DType::f32;
  Recompute recompute = Recompute::kNone;  // what backward recomputes (nn/layers.h)
  // The tied wte's two gradients apart (a part with both the embedding and
  // the head): wte is laid out last, so the head's dense gradient of it is
  // final right after the head's backward, and the embedding's sparse rows
  // go to GPT::set_embedding_rows's buffer instead (Embedding::rows).
  bool embedding_rows = false;
  // > 0: the LM head and loss fused, head_chunk rows of logits at a time
  // (train.fused_head, fused_head_rows), the (B,T,V) logits never stored;
  // the sums over rows of wte's gradient then go chunk by chunk. 0: the
  // logits of the whole micro-batch at once.
  int head_chunk = 0;
  // Where the parameters live (nn/params.h); the model's calls run there
  // under that device's kernels::DeviceScope, with an arena of its memory.
  Device device = Device::cpu();

  static GPTPart whole(const GPTConfig& cfg) { return {{{0, cfg.n_layer}}, true, true}; }
  int num_chunks() const { return int(chunks.size()); }
  bool starts_model(int chunk) const { return embedding && chunk == 0; }
  bool ends_model(int chunk) const { return head && chunk == num_chunks() - 1; }
};

class GPT;

// train.recompute's names: "none", "selective", "full" (anything else: kNone).
Recompute recompute_policy(const std::string& name);
// train.fused_head's chunk: the rows whose f32 logits over the part's
// vocabulary fit 32 MiB (a multiple of 16, at least 16): large enough for
// the head's GEMMs to run near their rate, small beside the logits of a
// micro-batch at a GPT-2 vocabulary.
int fused_head_rows(const GPTConfig& cfg, const GPTPart& part);

// What one forward of one model chunk saved for its backward, for one
// micro-batch: copies of the chunk's layers (a layer copy carries its own
// saved state, nn/layers.h) and the buffers at the chunk's boundaries. The
// storage is the arena it is bound to, valid until that arena's next reset(),
// so each micro-batch in flight has its own arena. Several Activations of one
// model may be alive at once: a pipeline's 1F1B keeps up to pp of them.
class Activations {
 public:
  // (B,T,C): where the previous stage's output is received (chunks that do
  // not start the model), and the gradient of it to send back after backward.
  float* input() const { return input_; }
  const float* input_grad() const { return input_grad_; }
  // (B,T,C): the chunk's output residual for the next stage (chunks that do
  // not end the model), valid after forward; and where the gradient of it is
  // received (backward uses it in place).
  const float* output() const { return output_; }
  float* output_grad() const { return output_grad_; }
  // The head chunk's (B,T,V) logits (a forward without targets, which gives
  // f32 logits in either precision; tensor-parallel: (B,T,vocab().size()),
  // this rank's columns) and (B,T) losses.
  const float* logits() const;
  const float* losses() const { return losses_; }
  int chunk() const { return chunk_; }

 private:
  friend class GPT;

// train.recompute's names: "none", "selective", "full" (anything else: kNone).
Recompute recompute_policy(const std::string& name);
  Arena* arena_ = nullptr;
  int chunk_ = -1, B_ = 0, T_ = 0;
  Embedding embed_;
  std::vector<Block> blocks_;
  LayerNorm ln_f_;
  const int32_t* tokens_ = nullptr;  // the arena's copy: the embedding's backward reads it
  float* input_ = nullptr;
  float* output_ = nullptr;
  float* output_grad_ = nullptr;
  void* lnf_out_ = nullptr;   // (B,T,C), of the model's activation type
  void* logits_ = nullptr;    // (B,T,V), or dlogits after a training forward
  float* head_dh_ = nullptr;  // fused head (GPTPart::head_chunk): (B,T,C) dlnf_out, all rows
  DType logits_type_ = DType::f32;  // bf16 in a bf16 forward with targets
  float* losses_ = nullptr;   // (B,T)
  float* dr_ = nullptr;       // (B,T,C) the running residual gradient of backward
  const float* input_grad_ = nullptr;
  enum class State { kBound, kForward, kInputDone, kDone } state_ = State::kDone;
  bool have_grad_ = false;
};

class GPT {
 public:
  explicit GPT(const GPTConfig& cfg) : GPT(cfg, GPTPart::whole(cfg)) {}
  // tp: the group's collectives when part.tp > 1 (its size and rank are
  // part.tp and part.tp_rank); it must outlive the model.
  GPT(const GPTConfig& cfg, const GPTPart& part, TensorParallel* tp = nullptr);

  // Sizes known before anything is allocated (the memory check and planner):
  // floats in the flat parameter buffer (padding included; the gradient
  // buffer is as large), and the peak bytes of one micro-batch's arena
  // through one chunk (forward + backward; split_backward: the kInput pass
  // keeps the weight pass's inputs, see nn/layers.h).
  static size_t flat_params(const GPTConfig& cfg, const GPTPart& part);
  // The part's parameters as a ParamRegistry lays them out (nothing allocated).
  static std::vector<ParamSpec> param_specs(const GPTConfig& cfg, const GPTPart& part);
  static size_t flat_params(const GPTConfig& cfg) { return flat_params(cfg, GPTPart::whole(cfg)); }
  static size_t activation_bytes(const GPTConfig& cfg, const GPTPart& part, int chunk, int B, int T,
                                 bool split_backward = false);
  static size_t activation_bytes(const GPTConfig& cfg, int B, int T) {
    return activation_bytes(cfg, GPTPart::whole(cfg), 0, B, T);
  }

  const GPTConfig& config() const { return cfg_; }
  const GPTPart& part() const { return part_; }
  // The rows of the vocabulary (of wte, of the logits) this part holds.
  IndexRange vocab() const { return embed_.vocab; }
  // GPTPart::embedding_rows: where the embedding's backward appends its wte
  // gradient rows (for contexts bound after the call).
  void set_embedding_rows(EmbeddingRows* rows) { embed_.rows = rows; }
  // Floats of what crosses a stage boundary for B x T tokens: the residual
  // stream, (B,T,C), or this rank's rows of it under sequence parallelism.
  size_t boundary_floats(int B, int T) const {
    return size_t(B) * T * cfg_.n_embd / size_t(sequence_ ? part_.tp : 1);
  }
  ParamRegistry& params() { return params_; }
  const ParamRegistry& params() const { return params_; }
  void init_weights(uint64_t seed) { params_.init(seed); }

  // ---- one chunk, one micro-batch (pipeline stages) ----
  // Binds `a` to `arena` for B x T tokens through `chunk`; allocates a.input()
  // when the chunk does not start the model and a.output_grad() when it does
  // not end it.
  void bind(Activations& a, Arena& arena, int chunk, int B, int T) const;
  // The bound chunk's forward. tokens (B,T) int32 when the chunk starts the
  // model (copied into the arena), else a.input() holds the residual. On the
  // chunk that ends the model with targets (B,T): the per-token
  // cross-entropy (its mean: loss or add_loss), and grad_scale != 0 prepares
  // backward (the loss gradient, scaled by grad_scale / (B*T), replaces the
  // logits: fused kernel). Otherwise a.output() is the residual. Reads
  // nothing back to the host.
  void forward(Activations& a, const int32_t* tokens, const int32_t* targets,
               float grad_scale = 0.0f) const;
  // The mean cross-entropy over B*T of a's forward with targets (kernels'
  // add_mean: the same bits either way). loss reads it back to the host
  // (waits for the forward); add_loss adds it to *sum in the device's memory
  // and returns at once (the step's loss, read back at the step's end).
  float loss(const Activations& a) const;
  void add_loss(const Activations& a, double* sum) const;
  // Called during backward with an offset into the flat gradient buffer:
  // every gradient at or after it is final for this backward (used to start
  // communicating gradient buckets while backward continues). Pass it only to
  // the backward that finalises this part's gradients (the step's last of
  // each chunk, in chunk order from the last): it reports 0 at the end of
  // chunk 0.
  using GradsReady = std::function<void(size_t ready_from)>;
  // The bound chunk's backward; accumulates (+=) parameter gradients. dout
  // (B,T,C): the gradient of a.output() (null on the chunk that ends the
  // model; null elsewhere: a.output_grad() holds it). kAll or kInput leaves a.input_grad() for the previous stage; the
  // hook fires on kAll and kWeight only (after kInput nothing is final).
  // finalises: this is the chunk's last backward of the step (its gradients
  // are complete after it; sequence parallelism sums the LayerNorms' then).
  void backward(Activations& a, const float* dout, BackwardPass pass = BackwardPass::kAll,
                const GradsReady& grads_ready = nullptr, bool finalises = false) const;

  // ---- the whole model in one call (a part with one chunk, embedding and head) ----
  // tokens, targets (B,T) int32 (targets may be null: logits only), as above.
  // Activations come from `arena`: call arena.reset() before each micro-batch's
  // forward and backward() before the next reset().
  // Returns the mean loss where targets are given (read back: loss()), else 0.
  float forward(Arena& arena, const int32_t* tokens, const int32_t* targets, int B, int T,
                float grad_scale = 0.0f);
  void backward(Arena& arena, const GradsReady& grads_ready = nullptr);
  // (B,T,V) logits of the last whole-model forward when it ran with grad_scale == 0.
  const float* logits() const { return last_.logits(); }
  const float* losses() const { return last_.losses(); }

 private:
  GPTConfig cfg_;
  GPTPart part_;
  ParamRegistry params_;
  TensorParallel* tp_ = nullptr;
  bool sequence_ = false;  // sequence parallel (tp > 1)
  Embedding embed_;
  std::vector<std::vector<Block>> chunks_;  // per chunk, its blocks
  LayerNorm ln_f_;
  Activations last_;  // the whole-model calls'
  mutable kernels::DeviceScalars loss_;  // loss()'s sum on the part's device, read back

  // forward's last part on the chunk that ends the model (gpt.cc).
  void head_forward(Activations& a, const float* ra, const float* rb, const int32_t* targets,
                     float grad_scale) const;
};

}  // namespace crucible::nn
