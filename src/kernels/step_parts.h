// The time a step spends in each of its parts, on the device that runs them.
//
// On the CPU the kernels run inside the calls, so the host clock around a
// part is its time. On a GPU a launch returns before its kernels run: the
// host clock around the forward would time its launches, and the step's one
// wait at the read-back would land in whatever part came last. So on a GPU a
// part's span is a pair of CUDA events around its launches on the step's
// stream (kernels/cuda/cuda.h, "step parts"), read after the read-back: the
// device's own time, from the part's first kernel starting to its last
// ending, idle gaps between them included (a launch-bound part waits for the
// host there). A step captured into a CUDA graph records its spans into the
// graph (event record nodes: kernels/step_graph.h split()), so each launch of
// the graph times its parts as a launched step does.
#pragma once
#include "core/status.h"

namespace crucible::kernels {

enum class StepPart : int { kForward = 0, kBackward, kOptimizer };
inline constexpr int kStepParts = 3;
const char* step_part_name(StepPart p);  // "forward", "backward", "optimizer"

// Times the enclosed work as part p of this thread's step.
class PartSpan {
 public:
  explicit PartSpan(StepPart p);
  ~PartSpan();
  PartSpan(const PartSpan&) = delete;
  PartSpan& operator=(const PartSpan&) = delete;

 private:
  StepPart part_;
  bool gpu_ = false;
  int64_t t0_ = 0;  // CPU: the host clock at the start
  int slot_ = -1;   // GPU: the event pair (-1: not timed)
};

struct PartTimes {
  double seconds[kStepParts] = {};
  double operator[](StepPart p) const { return seconds[int(p)]; }
};

// Each part's seconds on this thread since the last take (or discard), summed
// over its spans. On a GPU call it after the step's read-back has waited for
// its kernels (it waits for the stream, which is then idle).
Result<PartTimes> take_part_times();
// Forgets the spans since the last take (a step abandoned half-way).
void discard_part_times();

}  // namespace crucible::kernels
