// A step's parts in device time (kernels/cuda/cuda.h, "step parts"): spans
// of kernels/cuda/event_pairs.h tagged with the part, summed per part at the
// step's end and, with the tracer on, placed on the GPU's "cuda:N step"
// trace track. Compiled only where the CUDA toolkit is.
#include "core/trace.h"
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/event_pairs.h"
#include "kernels/step_parts.h"

namespace crucible::kernels::cuda {

namespace {

// A step records two spans per micro-batch and chunk (its forward and its
// backward, or three with split backward passes) and one for the optimizer:
// 1024 pairs cover 300 micro-batches.
constexpr int kPartPairs = 1024;

EventPairs& pairs() {
  static EventPairs* p =
      new EventPairs(kPartPairs, "step");  // never destroyed: events outlive static destruction
  return *p;
}

}  // namespace

// Inside a capture a span belongs to the graph (its event record nodes); a
// span never straddles a capture's edge (the whole body is captured).
int part_begin(Stream s) {
  if (capturing()) {
    EventPairs* graph = capture_span_pairs();
    return graph ? graph->begin(s) : -1;
  }
  if (!pairs().make()) return -1;
  return pairs().begin(s);
}

void part_end(int slot, int part, Stream s) {
  if (capturing()) {
    if (EventPairs* graph = capture_span_pairs()) graph->end(slot, part, s);
    return;
  }
  pairs().end(slot, part, s);
}

Status collect_part_times(Stream s, double* seconds, int parts) {
  const bool tracing = trace::active();
  auto add = [&](const EventPairs& from) {
    return [&, track = from.track()](const EventPairs::Span& span) {
      if (span.tag < 0 || span.tag >= parts) return;
      seconds[span.tag] += double(span.ns) * 1e-9;
      if (tracing)
        trace::record_complete_on(track, step_part_name(StepPart(span.tag)), "gpu", span.host_t0,
                                  span.host_t0 + span.ns);
    };
  };
  CRUCIBLE_RETURN_IF_ERROR(pairs().collect(s, add(pairs())).status());
  // A split graph's spans are its latest launch's, recorded again at the next.
  for (EventPairs* graph : take_launched_spans())
    CRUCIBLE_RETURN_IF_ERROR(graph->collect(s, add(*graph), /*keep=*/true).status());
  return Status::ok();
}

void discard_part_times() {
  pairs().discard();
  take_launched_spans();
}

}  // namespace crucible::kernels::cuda
