// TrainStep: the model as this rank holds it under the job's layout, and one
// optimizer step of it: the micro-batch schedule (parallel/pipeline.h; data
// parallelism alone is its trivial case), the tied embedding's gradient sum
// between the first and the last pipeline stage, the data-parallel reduction
// (buckets, ZeRO) or the reproducible tree, the gradient norm over every
// rank that holds a distinct part, AdamW, and the ZeRO parameter gather.
//
// The parallelize step lives here, outside the model: the layout
// (parallel/layout.h) picks this rank's part (its pipeline stage's chunks
// and tensor-parallel shard, nn::GPTPart), its groups (sub-communicators of the world) and its share of
// the data (the data-parallel index). Not thread-safe.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "core/status.h"
#include "kernels/step_graph.h"
#include "comm/comm.h"
#include "parallel/data_parallel.h"
#include "parallel/embedding_rows.h"
#include "parallel/tree_reduce.h"
#include "nn/gpt.h"
#include "optim/adamw.h"
#include "parallel/layout.h"
#include "parallel/pipeline.h"
#include "parallel/tensor_parallel.h"
#include "runtime/config.h"
#include "runtime/heartbeat.h"
#include "runtime/metrics.h"

namespace crucible::runtime {

// parallel::stage_part, computing as cfg.train says (precision, recompute).
nn::GPTPart stage_part(const parallel::Layout& layout, const parallel::Coords& at, const Config& cfg);
// The whole model's part, computing as cfg.train says.
nn::GPTPart whole_part(const Config& cfg);

class TrainStep {
 public:
  // The job's layout, every constraint checked (the grid, the schedule, what
  // this build supports), without communicating: bad input is refused before
  // anything else happens.
  static Result<parallel::Layout> plan_layout(const Config& cfg, int world);
  // Collective over `world`: forms the groups, builds this rank's part.
  static Result<std::unique_ptr<TrainStep>> create(const Config& cfg, comm::Comm& world);
  ~TrainStep();

  const parallel::Layout& layout() const { return layout_; }
  const parallel::Coords& coords() const { return coords_; }
  nn::GPT& model() { return *model_; }
  optim::AdamW& optimizer() { return *adam_; }
  parallel::DataParallel* data_parallel() { return dp_.get(); }
  // wte's embedding rows are reduced apart from its head gradient (parallel/embedding_rows.h).
  bool embedding_rows_apart() const { return rows_ != nullptr; }
  comm::Comm& dp_group() { return *groups_.dp; }
  comm::Comm& pp_group() { return *groups_.pp; }
  // Whether this rank reports the loss: its part ends the model (it
  // computes the loss) and it is the first of its tensor-parallel group
  // (every rank of which computes the same loss).
  bool has_loss() const { return model_->part().head && coords_.tp == 0; }
  // This rank's data-parallel share of every global batch: (index, count).
  int data_rank() const { return coords_.dp; }
  int data_ranks() const { return layout_.dp(); }

  // One optimizer step at learning rate lr. load(micro, tokens, targets)
  // gives this rank's micro-batches of the step (returns seconds waited);
  // before(action) runs before each schedule action, phase(p) at each phase
  // after the schedule (reduce, optimizer, gather). Fills m's loss sum
  // (m.loss: the mean over this rank's micro-batches on the stage with the
  // loss, else 0), grad_norm and the time split. Collective over the world.
  Status run(float lr, const std::function<double(int, int32_t*, int32_t*)>& load,
             const std::function<void(const parallel::Action&)>& before,
             const std::function<void(Phase)>& phase, StepMetrics& m);
  // Validation forward of n micro-batches; load(i, ...) gives the i-th of
  // this rank's. Returns the sum of their mean losses where has_loss() (0
  // elsewhere). Collective over the pipeline and tensor-parallel groups.
  Result<double> evaluate(int n, const std::function<void(int, int32_t*, int32_t*)>& load);
  // What the step measured its bubble at in the last step: seconds this
  // rank waited in the schedule's receives, and the schedule's theory.
  double last_wait_s() const { return last_wait_s_; }
  double theoretical_bubble() const;

  // CUDA graphs (kernels/step_graph.h; docs/gpu.md): whether this step can be
  // captured and replayed (run.cuda_graphs, a GPU, one rank: several ranks
  // sum the norm through the host and their collectives run outside the
  // stream) and whether the next steps may be, as the caller says: not a step
  // whose kernels are timed or whose first run allocates (the process's
  // first), nor one with injected faults (they fire from host hooks a replay
  // skips). The first allowed step is captured; later ones replay it.
  static bool graphs_apply(const Config& cfg, int world);
  bool graphs_apply() const { return graphs_apply(cfg_, layout_.world()); }
  void allow_graph(bool allowed) { graph_allowed_ = allowed; }
  // Why CUDA refused to capture the step ("" if it did not): the run goes on
  // without graphs.
  const std::string& graph_refusal() const { return graph_refusal_; }
  // Once, the run's warning about its graphs: refused (the run goes on
  // without), or not timing the step's parts (its replayed steps then have
  // graph_ms and no forward, backward or optimizer: metrics.h). "" else.
  std::string take_graph_warning() { return std::exchange(graph_warning_, std::string()); }

 private:
  TrainStep() = default;
  Status tie_embedding();  // sums wte's gradient between the first and last stage
  // The step after its host prologue (the batch loaded, the scalars written):
  // the schedule, the reductions, AdamW, the gradients zeroed. What a graph
  // records: its host side changes nothing a later step reads.
  Status body(float grad_scale, kernels::StepScalars* scalars, const parallel::StepHooks& hooks,
              const std::function<void(Phase)>& phase, StepMetrics& m);

  parallel::Layout layout_;
  parallel::Coords coords_;
  parallel::Groups groups_;
  std::unique_ptr<comm::Comm> tied_;  // first and last stage of this pipeline (pp > 1)
  std::unique_ptr<parallel::CommTensorParallel> tp_;  // the TP group's collectives (tp > 1)
  std::unique_ptr<nn::GPT> model_;
  std::unique_ptr<parallel::DataParallel> dp_;
  std::unique_ptr<parallel::EmbeddingGradRows> rows_;  // wte's embedding rows apart (dp_ with overlap, pp = 1)
  std::unique_ptr<parallel::TreeReducer> tree_;
  std::unique_ptr<optim::AdamW> adam_;
  std::unique_ptr<parallel::PipelineStage> stage_;
  std::unique_ptr<kernels::StepGraph> graph_;
  bool graph_allowed_ = false;
  std::string graph_refusal_;
  std::string graph_warning_;  // not yet taken
  Config cfg_;
  double last_wait_s_ = 0;
  // The data-parallel communication inside this step's backward (the body's;
  // taken out of the backward's time once the parts are read).
  double comm_in_backward_ms_ = 0;
};

}  // namespace crucible::runtime
