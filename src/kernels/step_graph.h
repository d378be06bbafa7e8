// A step's device work recorded once and replayed (docs/gpu.md "CUDA graphs").
//
// A GPU step of GPT-2 124M launches ~330 kernels, each costing the host a few
// microseconds and the GPU a gap between kernels. A CUDA graph records the
// launches of one step once (capture: nothing runs) and queues them all with
// one call afterwards. What may be captured (the caller's promise): a body
// whose device work is the same every step, with the same addresses,
// and whose host side changes nothing that the next step depends on: every
// per-step value sits in device memory written before the body (the token
// batch in pinned memory at a fixed address, the step's scalars), no host
// wait inside it (no copy_and_wait), no allocation from a pool that would
// hand out another address, no per-kernel timing (its CUDA events are a
// pool's, read and reused at every collect). The step's parts are timed by
// events the graph owns (split()).
//
// The body is captured on a stream of the graph's own and replayed there,
// ordered after whatever the caller's stream holds and before what it queues
// next, so the caller keeps its stream (the legacy one included, which cannot
// be captured). The kernel statistics (core/kernel_stats.h: calls, FLOPs,
// bytes) the body's calls counted at capture are added again at each replay,
// since a replay calls nothing on the host.
#pragma once
#include <functional>
#include <string>

#include "core/device.h"
#include "core/kernel_stats.h"
#include "core/status.h"

struct CUstream_st;

namespace crucible::kernels {

namespace cuda {
struct Graph;
}

class StepGraph {
 public:
  // Whether a step on `device` can be captured in this build (a GPU with the
  // CUDA backend).
  static bool available(Device device);
  // For the calling thread's device scope (a GPU's).
  StepGraph();
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  bool captured() const { return graph_ != nullptr; }
  // Whether each launch of the graph times the step's parts
  // (kernels/step_parts.h): their spans' CUDA events are recorded inside it
  // (event record nodes, cudaEventRecordExternal) and read after the
  // launch's read-back as a launched step's are. Else unsplit() says why (a
  // capture with them refused, or the events not made) and the graph's step
  // is only whole (metrics.h graph_ms).
  bool split() const;
  const std::string& unsplit() const { return unsplit_; }
  // Records body's device work and runs it once (so the step happens);
  // returns body's status (a body that fails leaves capture mode, and the
  // step is lost as without a graph). Where CUDA refuses the capture (an
  // operation it cannot record), nothing recorded ran: it is captured once
  // more without the parts' events (an unsplit graph), and where that is
  // refused too the body runs again uncaptured (it changed no host state),
  // captured() stays false and refusal() says why.
  Status capture(const std::function<Status()>& body);
  const std::string& refusal() const { return refusal_; }
  // Queues the recorded step again.
  Status replay();

 private:
  Device device_;
  CUstream_st* caller_ = nullptr;  // the stream of the scope it was made in
  CUstream_st* stream_ = nullptr;  // its own, captured on
  cuda::Graph* graph_ = nullptr;
  std::string refusal_;
  std::string unsplit_;  // why a captured graph does not time the step's parts
  KernelStatsTable counted_{};  // what one replay adds (ns: none; a replay is not timed per kernel)
};

}  // namespace crucible::kernels
