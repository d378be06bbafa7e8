#include "core/trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <memory>
#include <set>
#include <mutex>

namespace crucible::trace {

namespace detail {
std::atomic<bool> g_active{false};
}  // namespace detail

namespace {

// Pre-reserved so the hot path does not reallocate during a typical step.
constexpr size_t kReserveEvents = size_t(1) << 14;

std::atomic<int64_t> g_origin{now_ns()};
std::atomic<int64_t> g_dropped{0};

struct ThreadBuffer {
  std::mutex mu;  // guards everything below; contended only by take/clear
  std::vector<Event> events;
  bool exited = false;
  int tid = 0;
};

struct Registry {
  std::mutex mu;  // guards everything below
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  // names[tid - 1]; kept after a thread exits, for its events still to be written.
  std::vector<std::string> names;
  std::set<int> tracks;  // the tids of named_track()s, which no thread has
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: threads may record during exit
  return *r;
}

bool is_main_thread() { return syscall(SYS_gettid) == getpid(); }

// Registers the thread's buffer on first use; marks it exited at thread exit so
// take_events() can release it once drained.
struct ThreadHolder {
  std::shared_ptr<ThreadBuffer> buf;
  ThreadHolder() : buf(std::make_shared<ThreadBuffer>()) {
    buf->events.reserve(kReserveEvents);
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    buf->tid = int(r.names.size()) + 1;
    r.names.push_back(is_main_thread() ? "main" : "thread " + std::to_string(buf->tid));
    r.buffers.push_back(buf);
  }
  ~ThreadHolder() {
    std::lock_guard lock(buf->mu);
    buf->exited = true;
  }
};

ThreadBuffer& local_buffer() {
  thread_local ThreadHolder holder;
  return *holder.buf;
}

// tid 0: the calling thread's own.
void push(const Event& e, int tid = 0) {
  ThreadBuffer& b = local_buffer();
  std::lock_guard lock(b.mu);
  if (b.events.size() >= kMaxEventsPerThread) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  b.events.push_back(e);
  b.events.back().tid = tid > 0 ? tid : b.tid;
}

}  // namespace

void set_active(bool on) { detail::g_active.store(on, std::memory_order_relaxed); }

int64_t origin_ns() { return g_origin.load(std::memory_order_relaxed); }
void set_origin_ns(int64_t t) { g_origin.store(t, std::memory_order_relaxed); }

void record_complete(const char* name, const char* cat, int64_t t0_ns, int64_t t1_ns) {
  record_complete_on(0, name, cat, t0_ns, t1_ns);
}

int named_track(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (size_t i = 0; i < r.names.size(); ++i)
    if (r.names[i] == name && r.tracks.count(int(i) + 1)) return int(i) + 1;
  r.names.push_back(name);
  const int tid = int(r.names.size());
  r.tracks.insert(tid);
  return tid;
}

// track 0: the calling thread's own.
void record_complete_on(int track, const char* name, const char* cat, int64_t t0_ns, int64_t t1_ns) {
  if (!active()) return;
  Event e;
  e.name = name;
  e.cat = cat;
  e.ph = 'X';
  e.ts_ns = t0_ns - origin_ns();
  e.dur_ns = t1_ns > t0_ns ? t1_ns - t0_ns : 0;
  push(e, track);
}

void counter(const char* name, double value) {
  if (!active()) return;
  Event e;
  e.name = name;
  e.cat = "counter";
  e.ph = 'C';
  e.ts_ns = now_ns() - origin_ns();
  e.value = value;
  push(e);
}

void set_thread_name(const std::string& name) {
  const int tid = local_buffer().tid;
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.names[tid - 1] = name;
}

std::vector<std::pair<int, std::string>> thread_names() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<std::pair<int, std::string>> out;
  for (size_t i = 0; i < r.names.size(); ++i) out.emplace_back(int(i) + 1, r.names[i]);
  return out;
}

std::vector<Event> take_events() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<Event> out;
  std::vector<std::shared_ptr<ThreadBuffer>> live;
  for (auto& b : r.buffers) {
    // A fresh reserved buffer is allocated outside the buffer's lock, so the
    // recording thread waits only for a swap, and does not regrow its buffer.
    std::vector<Event> fresh;
    bool exited;
    {
      std::lock_guard block(b->mu);
      exited = b->exited;
    }
    if (!exited) fresh.reserve(kReserveEvents);
    {
      std::lock_guard block(b->mu);
      fresh.swap(b->events);
      exited = b->exited;
    }
    out.insert(out.end(), fresh.begin(), fresh.end());
    if (!exited) live.push_back(b);
  }
  r.buffers.swap(live);
  return out;
}

void clear() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<std::shared_ptr<ThreadBuffer>> live;
  for (auto& b : r.buffers) {
    std::lock_guard block(b->mu);
    b->events.clear();
    if (!b->exited) live.push_back(b);
  }
  r.buffers.swap(live);
  g_dropped.store(0, std::memory_order_relaxed);
}

int64_t dropped_events() { return g_dropped.load(std::memory_order_relaxed); }

}  // namespace crucible::trace
