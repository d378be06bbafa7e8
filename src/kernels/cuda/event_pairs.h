// Spans of device time from pairs of CUDA events (internal to the CUDA
// backend; kernel_timing.cc and part_timing.cc each keep one pool).
//
// A launch returns before its kernel runs, so a host clock around it times
// the launch. A span instead records one event on its stream before its work
// and one after; collect() waits for the stream, reads each pair's elapsed
// time, and places it on the host clock: after the stream has drained one
// more event is recorded and waited for and the host clock read at once, so
// that event's host time is known within the wait's wake-up (~10 us), and
// every earlier event is placed by its elapsed time to it
// (cudaEventElapsedTime, ~0.5 us resolution). The events are made once per
// GPU (none inside a step); a span begun when every pair is in use is left
// untimed and counted (dropped), never waited for.
//
// A pool recorded while a CUDA graph is captured (record flags
// cudaEventRecordExternal) becomes event record nodes of the graph: each
// launch of the graph records the same events again, so its spans are read
// after every launch and kept (collect's `keep`) for the next.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"

namespace crucible::kernels::cuda {

class EventPairs {
 public:
  // pairs: the pool's size; track: the trace track's name after "cuda:N ";
  // record_flags: cudaEventRecordWithFlags's (cudaEventRecordExternal for a
  // pool recorded into a graph).
  EventPairs(int pairs, std::string track, unsigned record_flags = cudaEventRecordDefault)
      : pairs_(pairs), track_name_(std::move(track)), record_flags_(record_flags) {}
  ~EventPairs();  // destroys the events (a graph's pool, with its graph)
  EventPairs(const EventPairs&) = delete;
  EventPairs& operator=(const EventPairs&) = delete;

  // Makes the pool for the calling thread's GPU (again where that changed);
  // false where CUDA refuses.
  bool make();
  // A pair's slot, its first event recorded on s; -1 where no pool exists or
  // every pair is in use (counted as dropped).
  int begin(cudaStream_t s);
  // Records slot's second event on s, tagged (the span's class).
  void end(int slot, int tag, cudaStream_t s);
  struct Span {
    int tag;
    int64_t ns;       // device time between the two events
    int64_t host_t0;  // the first event's time on the host clock (core/clock.h)
  };
  // Waits for s, then hands every completed pair to `each` and frees them
  // all (a pair never ended is skipped), or keeps them where `keep` (a
  // graph's, recorded again at its next launch). Returns the spans dropped
  // since the last collect.
  Result<int64_t> collect(cudaStream_t s, const std::function<void(const Span&)>& each, bool keep = false);
  // Frees every pair without reading it (a step abandoned half-way).
  void discard();
  // The trace track of the pool's GPU ("cuda:N <track>"), made with the pool.
  int track() const { return track_; }

 private:
  void release();  // destroys the events made so far
  const int pairs_;
  const std::string track_name_;
  const unsigned record_flags_;
  std::mutex mu_;
  int device_ = -1;  // the GPU the events belong to
  std::vector<cudaEvent_t> begin_, end_;
  std::vector<int> pending_;   // pending_[i]: pair i's tag (-1 until ended)
  cudaEvent_t now_ = nullptr;  // collect()'s reference event
  int64_t dropped_ = 0;
  int track_ = 0;
};

// The step parts' pools of captured graphs (graph.cc), for part_timing.cc:
// the pool of the capture under way on this thread (null outside one, or in
// a capture without spans), and the pools of the split graphs this thread
// launched since the last take.
EventPairs* capture_span_pairs();
std::vector<EventPairs*> take_launched_spans();

}  // namespace crucible::kernels::cuda
