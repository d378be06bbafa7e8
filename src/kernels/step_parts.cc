#include "kernels/step_parts.h"

#include "core/clock.h"
#include "kernels/cuda/cuda.h"
#include "kernels/device_scope.h"

namespace crucible::kernels {

namespace {
// The CPU's spans, summed as they end (the training thread's).
thread_local PartTimes host_parts;
}  // namespace

const char* step_part_name(StepPart p) {
  switch (p) {
    case StepPart::kForward:
      return "forward";
    case StepPart::kBackward:
      return "backward";
    case StepPart::kOptimizer:
      return "optimizer";
  }
  return "?";
}

PartSpan::PartSpan(StepPart p) : part_(p) {
  const ExecTarget& here = current_target();
  gpu_ = !here.device.is_cpu();
  if (gpu_)
    slot_ = cuda::part_begin(here.stream);
  else
    t0_ = now_ns();
}

PartSpan::~PartSpan() {
  if (gpu_) {
    cuda::part_end(slot_, int(part_), current_target().stream);
    return;
  }
  host_parts.seconds[int(part_)] += double(now_ns() - t0_) * 1e-9;
}

Result<PartTimes> take_part_times() {
  PartTimes out = host_parts;
  host_parts = PartTimes{};
  const ExecTarget& here = current_target();
  if (here.device.is_cpu()) return out;
  CRUCIBLE_RETURN_IF_ERROR(cuda::collect_part_times(here.stream, out.seconds, kStepParts));
  return out;
}

void discard_part_times() {
  host_parts = PartTimes{};
  cuda::discard_part_times();
}

}  // namespace crucible::kernels
