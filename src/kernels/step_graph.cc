#include "kernels/step_graph.h"

#include "core/check.h"
#include "kernels/cuda/cuda.h"
#include "kernels/device_scope.h"

namespace crucible::kernels {

bool StepGraph::available(Device device) { return device.is_cuda() && cuda::compiled(); }

StepGraph::StepGraph() : device_(current_target().device), caller_(current_target().stream) {
  CRUCIBLE_CHECK(available(device_), "[kernels] a step graph outside a GPU's scope");
  auto s = cuda::create_stream(device_.index);
  CRUCIBLE_CHECK(s.is_ok(), s.status().message().c_str());
  stream_ = *s;
}

StepGraph::~StepGraph() {
  cuda::destroy_graph(graph_);
  cuda::destroy_stream(stream_);
}

Status StepGraph::capture(const std::function<Status()>& body) {
  CRUCIBLE_CHECK(!graph_, "[kernels] a step graph is captured once");
  CRUCIBLE_CHECK(!cuda::kernel_timing(),
                 "[kernels] a timed step is not captured (its CUDA events)");
  // The graph's stream waits for what the caller queued (the batch's and the
  // scalars' copies) before capture starts: a wait recorded inside would
  // tie the graph to this one step.
  CRUCIBLE_RETURN_IF_ERROR(cuda::stream_wait(stream_, caller_));
  const KernelStatsTable before = kernel_stats();
  // First with the step parts' events inside (a split graph); where CUDA
  // refuses that capture, once more without them before giving up on graphs.
  Result<cuda::Graph*> graph = Status::internal("");
  for (const bool spans : {true, false}) {
    if (Status began = cuda::begin_capture(stream_, spans); !began) {
      refusal_ = began.message();
      return body();
    }
    Status ran;
    {
      DeviceScope on(device_, stream_);
      ran = body();
    }
    graph = cuda::end_capture(stream_);
    if (!ran) {
      if (graph) cuda::destroy_graph(*graph);
      return ran;
    }
    if (graph) break;
    kernel_stats() = before;  // nothing ran: the next capture, or the body uncaptured, counts it
    if (spans) unsplit_ = graph.status().message();
  }
  if (!graph) {
    refusal_ = graph.status().message();
    unsplit_.clear();
    return body();
  }
  graph_ = *graph;
  if (!cuda::graph_split(graph_) && unsplit_.empty()) unsplit_ = "the step parts' CUDA events could not be made";
  const KernelStatsTable& after = kernel_stats();
  for (size_t c = 0; c < counted_.size(); ++c) {
    counted_[c].calls = after[c].calls - before[c].calls;
    counted_[c].flops = after[c].flops - before[c].flops;
    counted_[c].bytes = after[c].bytes - before[c].bytes;
  }
  // The step itself (its counts are already in the table).
  CRUCIBLE_RETURN_IF_ERROR(cuda::launch_graph(graph_, stream_));
  return cuda::stream_wait(caller_, stream_);
}

bool StepGraph::split() const { return graph_ != nullptr && cuda::graph_split(graph_); }

Status StepGraph::replay() {
  CRUCIBLE_CHECK(graph_, "[kernels] replay before capture");
  CRUCIBLE_RETURN_IF_ERROR(cuda::stream_wait(stream_, caller_));
  CRUCIBLE_RETURN_IF_ERROR(cuda::launch_graph(graph_, stream_));
  KernelStatsTable& t = kernel_stats();
  for (size_t c = 0; c < t.size(); ++c) {
    t[c].calls += counted_[c].calls;
    t[c].flops += counted_[c].flops;
    t[c].bytes += counted_[c].bytes;
  }
  return cuda::stream_wait(caller_, stream_);
}

}  // namespace crucible::kernels
