// Device-side kernel timing from CUDA events (kernels/cuda/cuda.h,
// "kernel timing"). Compiled only where the CUDA toolkit is.
//
// A launch on a GPU returns before the kernel runs, so the host clock around
// it measures the launch (a few microseconds), not the kernel. Instead each
// timed kernel gets a pair of events recorded on its stream before and after
// it; collect_kernel_times() waits for the stream, reads every pair's elapsed
// time into core/kernel_stats.h's table (calls, FLOPs and bytes were counted
// at the launch, as on the CPU) and, with the tracer on, places each kernel on the GPU's own
// trace track.
//
// Host time of a device event: after the stream has drained, one more event
// is recorded and waited for, and the host clock read at once: that event's
// host time is known within the wait's wake-up (~10 us), and every earlier
// event is placed by its elapsed time to it (cudaEventElapsedTime, ~0.5 us
// resolution). Events come from a pool made once per GPU (no creation inside a
// step); a step that times more kernels than the pool holds leaves the rest
// untimed and counts them (dropped), never blocks.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/kernel_stats.h"
#include "core/trace.h"
#include "kernels/cuda/cuda.h"

namespace crucible::kernels::cuda {

namespace {

// Pairs in the pool: a GPT-2 350M step with gradient accumulation 4 makes
// ~3,000 timed kernels; 8192 pairs is 16k events, ~1 MiB of driver state.
constexpr int kPairs = 8192;


struct Timing {
  std::mutex mu;
  std::atomic<bool> on{false};  // read without the lock by every launch
  int device = -1;  // the GPU the pool's events belong to
  std::vector<cudaEvent_t> begin, end;
  std::vector<KernelClass> pending;  // pending[i]: pair i's kernel class
  cudaEvent_t now = nullptr;     // the reference event of collect()
  int64_t dropped = 0;
  int track = 0;  // the trace track of the pool's GPU
};

Timing& timing() {
  static Timing* t = new Timing;  // never destroyed: events outlive static destruction
  return *t;
}

// Creates the pool for the calling thread's GPU (timing's lock held).
bool make_pool(Timing& t) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (t.device == dev) return true;
  for (cudaEvent_t e : t.begin) cudaEventDestroy(e);
  for (cudaEvent_t e : t.end) cudaEventDestroy(e);
  if (t.now) cudaEventDestroy(t.now);
  t.begin.assign(kPairs, nullptr);
  t.end.assign(kPairs, nullptr);
  for (int i = 0; i < kPairs; ++i)
    if (cudaEventCreate(&t.begin[size_t(i)]) != cudaSuccess || cudaEventCreate(&t.end[size_t(i)]) != cudaSuccess)
      return false;
  if (cudaEventCreate(&t.now) != cudaSuccess) return false;
  t.pending.clear();
  t.pending.reserve(kPairs);
  t.device = dev;
  t.track = trace::named_track("cuda:" + std::to_string(dev) + " kernels");
  return true;
}

}  // namespace

Status set_kernel_timing(bool on) {
  Timing& t = timing();
  std::lock_guard lock(t.mu);
  if (on && !make_pool(t)) {
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
  std::lock_guard lock(t.mu);
  if (t.pending.size() >= size_t(kPairs)) {
    ++t.dropped;
    return -1;
  }
  const int slot = int(t.pending.size());
  cudaEventRecord(t.begin[size_t(slot)], s);
  t.pending.push_back(KernelClass::other);
  return slot;
}

void kernel_end(int slot, KernelClass cls, Stream s) {
  if (slot < 0) return;
  Timing& t = timing();
  std::lock_guard lock(t.mu);
  if (size_t(slot) >= t.pending.size()) return;  // collected in between: the pair is lost, not misread
  cudaEventRecord(t.end[size_t(slot)], s);
  t.pending[size_t(slot)] = cls;
}

Result<KernelTimes> collect_kernel_times(Stream s) {
  Timing& t = timing();
  std::lock_guard lock(t.mu);
  KernelTimes out;
  out.dropped = t.dropped;
  t.dropped = 0;
  if (t.pending.empty()) return out;
  if (cudaError_t e = cudaStreamSynchronize(s); e != cudaSuccess)
    return Status::invalid(std::string("[cuda] kernel timing: stream synchronize: ") + cudaGetErrorString(e));
  cudaEventRecord(t.now, s);
  cudaEventSynchronize(t.now);
  const int64_t host_now = now_ns();
  KernelStatsTable& stats = kernel_stats();
  const bool tracing = trace::active();
  for (size_t i = 0; i < t.pending.size(); ++i) {
    float ms = 0, before_now = 0;
    if (cudaEventElapsedTime(&ms, t.begin[i], t.end[i]) != cudaSuccess) {
      cudaGetLastError();  // an end never recorded (a kernel_begin without its end): skip it
      continue;
    }
    const KernelClass cls = t.pending[i];
    const int64_t ns = int64_t(double(ms) * 1e6);
    KernelClassStats& k = stats[size_t(cls)];
    k.ns += ns;
    out.kernel_ns += ns;
    ++out.kernels;
    if (tracing && cudaEventElapsedTime(&before_now, t.begin[i], t.now) == cudaSuccess) {
      const int64_t t0 = host_now - int64_t(double(before_now) * 1e6);
      trace::record_complete_on(t.track, kernel_class_name(cls), "gpu", t0, t0 + ns);
    }
  }
  t.pending.clear();
  return out;
}

}  // namespace crucible::kernels::cuda
