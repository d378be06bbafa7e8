// Device-side kernel timing from CUDA events (kernels/cuda/cuda.h,
// "kernel timing"). Compiled only where the CUDA toolkit is.
//
// Each timed kernel is a span of kernels/cuda/event_pairs.h, tagged with its
// kernel class; collect_kernel_times() adds every span's device time to
// core/kernel_stats.h's table (calls, FLOPs and bytes were counted at the
// launch, as on the CPU) and, with the tracer on, places each kernel on the
// GPU's own trace track ("cuda:N kernels").
#include <atomic>

#include "core/kernel_stats.h"
#include "core/trace.h"
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/event_pairs.h"

namespace crucible::kernels::cuda {

namespace {

// Pairs in the pool: a GPT-2 350M step with gradient accumulation 4 makes
// ~3,000 timed kernels; 8192 pairs is 16k events, ~1 MiB of driver state.
constexpr int kKernelPairs = 8192;

struct Timing {
  std::atomic<bool> on{false};  // read without a lock by every launch
  EventPairs pairs{kKernelPairs, "kernels"};
};

Timing& timing() {
  static Timing* t = new Timing;  // never destroyed: events outlive static destruction
  return *t;
}

}  // namespace

Status set_kernel_timing(bool on) {
  Timing& t = timing();
  if (on && !t.pairs.make()) {
    cudaGetLastError();
    return Status::invalid("[cuda] kernel timing: cannot create the event pool");
  }
  t.on.store(on);
  return Status::ok();
}

bool kernel_timing() { return timing().on.load(std::memory_order_relaxed); }

int kernel_begin(Stream s) {
  Timing& t = timing();
  if (!t.on.load(std::memory_order_relaxed)) return -1;
  return t.pairs.begin(s);
}

void kernel_end(int slot, KernelClass cls, Stream s) { timing().pairs.end(slot, int(cls), s); }

Result<KernelTimes> collect_kernel_times(Stream s) {
  Timing& t = timing();
  KernelTimes out;
  KernelStatsTable& stats = kernel_stats();
  const bool tracing = trace::active();
  auto dropped = t.pairs.collect(s, [&](const EventPairs::Span& span) {
    const KernelClass cls = KernelClass(span.tag);
    stats[size_t(cls)].ns += span.ns;
    out.kernel_ns += span.ns;
    ++out.kernels;
    if (tracing)
      trace::record_complete_on(t.pairs.track(), kernel_class_name(cls), "gpu", span.host_t0,
                                span.host_t0 + span.ns);
  });
  if (!dropped) return dropped.status();
  out.dropped = *dropped;
  return out;
}

}  // namespace crucible::kernels::cuda
