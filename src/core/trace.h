// The tracer: an in-process recorder of Chrome trace events ("X" complete
// events and "C" counters), so every run can show where each millisecond of a
// step went in Perfetto / chrome://tracing without an external profiler.
// profile/trace_file.h writes, merges and validates the files.
//
// Cost: when inactive, a Scope is one relaxed atomic load (no clock read).
// When active, an event is two clock reads, an uncontended per-thread mutex
// and a push_back into a pre-reserved per-thread buffer; names and categories
// are static strings, stored as pointers (never copied, never freed).
//
// Timestamps are nanoseconds since a process-wide origin (set when the process
// starts; set_origin_ns() lets ranks agree on one, e.g. right after a barrier).
// tid is a small per-thread id (1, 2, ... in order of first recording).
//
// Thread-safety: any thread may record at any time. take_events(), clear() and
// thread_names() may run concurrently with recording threads (each thread's
// buffer has its own mutex, which only take/clear ever contend); an event
// recorded while take_events() runs lands in this take or the next, never lost
// or duplicated. Events of threads that have exited are kept until taken.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"

namespace crucible::trace {

struct Event {
  const char* name = "";  // static string
  const char* cat = "";   // static string: "phase", "kernel", "comm", "ckpt", ...
  char ph = 'X';          // 'X' complete event, 'C' counter
  int tid = 0;
  int64_t ts_ns = 0;   // start, since the origin
  int64_t dur_ns = 0;  // 'X' only
  double value = 0;    // 'C' only
};

namespace detail {
extern std::atomic<bool> g_active;
}  // namespace detail

void set_active(bool on);
inline bool active() { return detail::g_active.load(std::memory_order_relaxed); }

// The origin of event timestamps, in now_ns() time. Set it before recording:
// events already recorded keep the timestamps of the old origin.
int64_t origin_ns();
void set_origin_ns(int64_t t);

// Records a complete event from t0 to t1 (now_ns() time) if the tracer is
// active. For callers that already read the clock (ScopedKernelTimer).
void record_complete(const char* name, const char* cat, int64_t t0_ns, int64_t t1_ns);
// A device's timeline (a GPU stream's, from CUDA events): a track of its own
// in the trace, named `name` ("cuda:0 stream"), with a tid no thread has.
// The same name gives the same track. Events on it are recorded from the
// host thread that learnt their times (record_complete_on), so they sit in
// that thread's buffer but carry the track's tid.
int named_track(const std::string& name);
void record_complete_on(int track, const char* name, const char* cat, int64_t t0_ns, int64_t t1_ns);
// A counter sample ("C": the value of `name` from now on), if active.
void counter(const char* name, double value);

// Names this thread in traces ("train", "ckpt writer"); default "main" for the
// process's main thread and "thread N" otherwise.
void set_thread_name(const std::string& name);
// (tid, name) of every thread that has ever recorded or named itself, exited
// ones included (a few bytes each), so events taken later can still be named.
std::vector<std::pair<int, std::string>> thread_names();

// All threads' events, moved out (each thread's in recording order, i.e. by
// end time for 'X'). Buffers of exited threads are released once drained.
std::vector<Event> take_events();
// Drops all recorded events and resets the dropped-event count.
void clear();
// Events not recorded because a thread's buffer was full (kMaxEventsPerThread)
// since the last clear(): take_events() often enough keeps this 0.
int64_t dropped_events();
inline constexpr size_t kMaxEventsPerThread = size_t(1) << 21;  // 96 MiB of Events

// RAII complete event: from construction to destruction, if the tracer was
// active at construction.
class Scope {
 public:
  Scope(const char* name, const char* cat)
      : name_(name), cat_(cat), t0_(active() ? now_ns() : -1) {}
  ~Scope() {
    if (t0_ >= 0) record_complete(name_, cat_, t0_, now_ns());
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  const char* name_;
  const char* cat_;
  int64_t t0_;  // -1: inactive at construction, records nothing
};

}  // namespace crucible::trace
