// Streams and CUDA graphs (kernels/cuda/cuda.h): what kernels/step_graph.h
// captures a step with. Compiled only where the CUDA toolkit is.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/event_pairs.h"

namespace crucible::kernels::cuda {

struct Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  // The step parts' spans it records at each launch (null: not split).
  std::unique_ptr<EventPairs> spans;
};

namespace {
Status failed(cudaError_t e, const std::string& what) {
  return Status::internal("[cuda] " + what + ": " + cudaGetErrorString(e));
}
thread_local bool in_capture = false;
thread_local std::string refused;  // the capture's first refused operation
std::atomic<int> graphs{0};
// The spans of the capture under way (begin_capture with spans), the graph's
// once it is instantiated. A step records a few per micro-batch.
constexpr int kGraphPairs = 1024;
thread_local std::unique_ptr<EventPairs> capture_spans;
// Split graphs launched on this thread since their spans were last taken.
thread_local std::vector<Graph*> launched;
}  // namespace

EventPairs* capture_span_pairs() { return in_capture ? capture_spans.get() : nullptr; }

std::vector<EventPairs*> take_launched_spans() {
  std::vector<EventPairs*> out;
  for (Graph* g : launched) out.push_back(g->spans.get());
  launched.clear();
  return out;
}

bool capture_refused(const std::string& what) {
  if (!in_capture) return false;
  if (refused.empty()) refused = what;
  return true;
}

bool capturing() { return in_capture; }

int live_graphs() { return graphs.load(); }

Result<Stream> create_stream(int index) {
  int current = 0;
  cudaGetDevice(&current);
  if (current != index) cudaSetDevice(index);
  cudaStream_t s = nullptr;
  const cudaError_t e = cudaStreamCreate(&s);  // blocking: ordered with the legacy stream
  if (current != index) cudaSetDevice(current);
  if (e != cudaSuccess) return failed(e, "creating a stream on cuda:" + std::to_string(index));
  return s;
}

void destroy_stream(Stream s) {
  if (s) cudaStreamDestroy(s);
}

Status begin_capture(Stream s, bool spans) {
  if (!s) return Status::internal("[cuda] a graph cannot be captured on the legacy default stream");
  // The events are made before the capture: nothing but the step's own work
  // is queued while it records.
  capture_spans.reset();
  if (spans) {
    auto pairs = std::make_unique<EventPairs>(kGraphPairs, "step", cudaEventRecordExternal);
    if (pairs->make()) capture_spans = std::move(pairs);
  }
  const cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) return failed(e, "cudaStreamBeginCapture");
  in_capture = true;
  refused.clear();
  return Status::ok();
}

Result<Graph*> end_capture(Stream s) {
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamEndCapture(s, &graph);
  in_capture = false;
  std::unique_ptr<EventPairs> spans = std::move(capture_spans);
  if (!refused.empty()) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    return Status::internal("[cuda] capturing the step: " + refused);
  }
  if (e != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();  // the failed capture's error is this answer, not a sticky one
    return failed(e, "capturing the step (cudaStreamEndCapture)");
  }
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiate(&exec, graph, 0);
  if (e != cudaSuccess) {
    cudaGraphDestroy(graph);
    cudaGetLastError();
    return failed(e, "cudaGraphInstantiate");
  }
  ++graphs;
  return new Graph{graph, exec, std::move(spans)};
}

bool graph_split(const Graph* g) { return g && g->spans; }

Status launch_graph(Graph* g, Stream s) {
  const cudaError_t e = cudaGraphLaunch(g->exec, s);
  if (e != cudaSuccess) return failed(e, "cudaGraphLaunch");
  if (g->spans && std::find(launched.begin(), launched.end(), g) == launched.end()) launched.push_back(g);
  return Status::ok();
}

void destroy_graph(Graph* g) {
  if (!g) return;
  launched.erase(std::remove(launched.begin(), launched.end(), g), launched.end());
  if (g->exec) cudaGraphExecDestroy(g->exec);
  if (g->graph) cudaGraphDestroy(g->graph);
  delete g;
  --graphs;
}

Status stream_wait(Stream waiter, Stream on) {
  if (waiter == on) return Status::ok();
  cudaEvent_t ev = nullptr;
  cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (e != cudaSuccess) return failed(e, "cudaEventCreate");
  e = cudaEventRecord(ev, on);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(waiter, ev, 0);
  cudaEventDestroy(ev);  // released once the wait is satisfied
  return e == cudaSuccess ? Status::ok() : failed(e, "ordering two streams (cudaStreamWaitEvent)");
}

}  // namespace crucible::kernels::cuda
