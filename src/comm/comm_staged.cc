// The staged device Comm: device buffers copied through pinned host memory
// around the MPI Comm's calls (device_comm.h). Ranks sharing one GPU cannot
// use NCCL; this lets every layout run, and be tested, on such a machine.
//
// Each call stages what it reads (to_host, after the GPU's queued work),
// calls the host Comm on the staging buffers, and copies back what it writes
// (to_device) when the host call has finished: at once for blocking calls, in
// the Request's wait()/test() for non-blocking ones. A staging buffer lives as
// long as its call; buffers come from a pool that keeps them for the next call
// (pinned allocations cost milliseconds), so the pool grows to the most bytes
// in flight at once (a data-parallel step's buckets) and stays there.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "comm/device_comm.h"
#include "comm/wrapping_comm.h"
#include "core/trace.h"

namespace crucible::comm {
namespace {

class Pool {
 public:
  explicit Pool(std::shared_ptr<DeviceMemory> memory) : memory_(std::move(memory)) {}
  ~Pool() {
    for (auto& [bytes, p] : free_) memory_->free_pinned(p);
  }
  DeviceMemory& memory() { return *memory_; }
  Result<void*> acquire(size_t bytes, size_t* got) {
    auto it = free_.lower_bound(bytes);
    if (it != free_.end() &&
        it->first <= 2 * bytes + (size_t{1} << 20)) {  // not a huge block for a small call
      void* p = it->second;
      *got = it->first;
      free_.erase(it);
      return p;
    }
    const size_t rounded = std::max<size_t>(4096, (bytes + 4095) / 4096 * 4096);
    auto p = memory_->alloc_pinned(rounded);
    if (!p) return p.status();
    *got = rounded;
    return *p;
  }
  void release(void* p, size_t bytes) { free_.emplace(bytes, p); }

 private:
  std::shared_ptr<DeviceMemory> memory_;
  std::multimap<size_t, void*> free_;
};

// One staging buffer, returned to the pool when destroyed.
class Staged {
 public:
  Staged() = default;
  Staged(const Staged&) = delete;
  Staged& operator=(const Staged&) = delete;
  Staged(Staged&& o) noexcept { *this = std::move(o); }
  Staged& operator=(Staged&& o) noexcept {
    std::swap(pool_, o.pool_), std::swap(p_, o.p_), std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~Staged() {
    if (p_) pool_->release(p_, bytes_);
  }
  static Result<Staged> make(const std::shared_ptr<Pool>& pool, size_t bytes) {
    Staged s;
    auto p = pool->acquire(bytes, &s.bytes_);
    if (!p) return p.status();
    s.pool_ = pool, s.p_ = *p;
    return s;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  std::shared_ptr<Pool> pool_;
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// A host Request, then the copies back and the staging buffers' release.
class StagedRequest final : public Request::Impl {
 public:
  StagedRequest(Request inner, std::vector<Staged> buffers, std::function<Status()> after)
      : inner_(std::move(inner)), buffers_(std::move(buffers)), after_(std::move(after)) {}
  bool test(Status* status) override {
    if (!inner_.test()) return false;
    *status = finish(inner_.wait());
    return true;
  }
  Status wait() override { return finish(inner_.wait()); }

 private:
  Status finish(Status s) {
    if (s.is_ok() && after_) s = after_();
    buffers_.clear();
    return s;
  }
  Request inner_;
  std::vector<Staged> buffers_;
  std::function<Status()> after_;
};

size_t sum(const std::vector<size_t>& counts) {
  size_t t = 0;
  for (size_t c : counts) t += c;
  return t;
}

class StagedComm final : public detail::WrappingComm {
 public:
  StagedComm(Comm* host, std::unique_ptr<Comm> owned, std::shared_ptr<Pool> pool)
      : WrappingComm(host, std::move(owned)), pool_(std::move(pool)) {}

  std::string backend() const override { return host_->backend() + "+staged"; }
  using WrappingComm::allreduce;  // the blocking float one: iallreduce, waited for

  Request iallreduce(float* data, size_t n, ReduceOp op) override {
    if (!dev(data)) return host_->iallreduce(data, n, op);
    trace::Scope scope("stage", "comm");
    auto s = stage_in(data, n * sizeof(float));
    if (!s) return Request::finished(s.status());
    float* h = s->as<float>();
    return staged(host_->iallreduce(h, n, op), std::move(*s),
                  [=, this] { return out(data, h, n * sizeof(float)); });
  }
  Status allreduce(double* data, size_t n, ReduceOp op) override {
    if (!dev(data)) return host_->allreduce(data, n, op);
    auto s = stage_in(data, n * sizeof(double));
    if (!s) return s.status();
    CRUCIBLE_RETURN_IF_ERROR(host_->allreduce(s->as<double>(), n, op));
    return out(data, s->as<double>(), n * sizeof(double));
  }

  // The staged reduce-scatter is always in place on the staging copy of the
  // full buffer; the piece is copied out to wherever recv is.
  Request ireduce_scatter(const float* send, float* recv,
                          const std::vector<size_t>& counts) override {
    if (!dev(send) && !dev(recv)) return host_->ireduce_scatter(send, recv, counts);
    auto layout = detail::check_pieces("reduce_scatter", send, recv, counts, rank(), size());
    if (!layout) return Request::finished(layout.status());
    auto s = stage_in(send, layout->total * sizeof(float));
    if (!s) return Request::finished(s.status());
    float* full = s->as<float>();
    float* piece = full + layout->offset;
    const size_t count = layout->count;
    return staged(host_->ireduce_scatter(full, piece, counts), std::move(*s),
                  [=, this] { return out(recv, piece, count * sizeof(float)); });
  }
  // The staged all-gather is in place in a staging copy of the full buffer.
  Request iallgather(const float* send, float* recv, const std::vector<size_t>& counts) override {
    if (!dev(send) && !dev(recv)) return host_->iallgather(send, recv, counts);
    auto layout = detail::check_pieces("allgather", recv, send, counts, rank(), size());
    if (!layout) return Request::finished(layout.status());
    auto s = Staged::make(pool_, layout->total * sizeof(float));
    if (!s) return Request::finished(s.status());
    float* full = s->as<float>();
    if (Status st = in(full + layout->offset, send, layout->count * sizeof(float)); !st)
      return Request::finished(st);
    const size_t total = layout->total;
    return staged(host_->iallgather(full + layout->offset, full, counts), std::move(*s),
                  [=, this] { return out(recv, full, total * sizeof(float)); });
  }

  Request ialltoall_pieces(const bf16* send, bf16* recv,
                           const std::vector<size_t>& counts) override {
    if (!dev(send) && !dev(recv)) return host_->ialltoall_pieces(send, recv, counts);
    if (counts.size() != size_t(size()))
      return host_->ialltoall_pieces(send, recv, counts);  // its error
    const size_t in_bytes = sum(counts) * sizeof(bf16),
                 out_bytes = size_t(size()) * counts[size_t(rank())] * sizeof(bf16);
    auto s = stage_in(send, in_bytes);
    if (!s) return Request::finished(s.status());
    auto r = Staged::make(pool_, out_bytes);
    if (!r) return Request::finished(r.status());
    bf16* h = r->as<bf16>();
    Request inner = host_->ialltoall_pieces(s->as<bf16>(), h, counts);
    std::vector<Staged> bufs;
    bufs.push_back(std::move(*s)), bufs.push_back(std::move(*r));
    return Request(std::make_unique<StagedRequest>(std::move(inner), std::move(bufs),
                                                   [=, this] { return out(recv, h, out_bytes); }));
  }
  Request iallgather_pieces(bf16* recv, const std::vector<size_t>& counts) override {
    if (!dev(recv)) return host_->iallgather_pieces(recv, counts);
    const size_t bytes = sum(counts) * sizeof(bf16);
    auto s = stage_in(recv, bytes);
    if (!s) return Request::finished(s.status());
    bf16* h = s->as<bf16>();
    return staged(host_->iallgather_pieces(h, counts), std::move(*s),
                  [=, this] { return out(recv, h, bytes); });
  }

  Status broadcast(void* data, size_t bytes, int root) override {
    if (!dev(data)) return host_->broadcast(data, bytes, root);
    auto s = stage_in(data, bytes);
    if (!s) return s.status();
    CRUCIBLE_RETURN_IF_ERROR(host_->broadcast(s->as<void>(), bytes, root));
    return out(data, s->as<void>(), bytes);
  }
  Status allgather_bytes(const void* send, size_t bytes, void* recv) override {
    if (!dev(send) && !dev(recv)) return host_->allgather_bytes(send, bytes, recv);
    auto s = stage_in(send, bytes);
    if (!s) return s.status();
    auto r = Staged::make(pool_, bytes * size_t(size()));
    if (!r) return r.status();
    CRUCIBLE_RETURN_IF_ERROR(host_->allgather_bytes(s->as<void>(), bytes, r->as<void>()));
    return out(recv, r->as<void>(), bytes * size_t(size()));
  }

  Request isend(const void* data, size_t bytes, int dest, int tag) override {
    if (!dev(data)) return host_->isend(data, bytes, dest, tag);
    auto s = stage_in(data, bytes);
    if (!s) return Request::finished(s.status());
    Request inner =
        host_->isend(s->as<void>(), bytes, dest, tag);  // before *s moves into the request
    return staged(std::move(inner), std::move(*s), nullptr);
  }
  Request irecv(void* data, size_t bytes, int src, int tag) override {
    if (!dev(data)) return host_->irecv(data, bytes, src, tag);
    auto s = Staged::make(pool_, bytes);
    if (!s) return Request::finished(s.status());
    void* h = s->as<void>();
    return staged(host_->irecv(h, bytes, src, tag), std::move(*s),
                  [=, this] { return out(data, h, bytes); });
  }
  Status sendrecv(const void* send, size_t send_bytes, int dest, void* recv, size_t recv_bytes,
                  int src, int tag) override {
    if (!dev(send) && !dev(recv))
      return host_->sendrecv(send, send_bytes, dest, recv, recv_bytes, src, tag);
    auto s = stage_in(send, send_bytes);
    if (!s) return s.status();
    auto r = Staged::make(pool_, recv_bytes);
    if (!r) return r.status();
    CRUCIBLE_RETURN_IF_ERROR(
        host_->sendrecv(s->as<void>(), send_bytes, dest, r->as<void>(), recv_bytes, src, tag));
    return out(recv, r->as<void>(), recv_bytes);
  }

  Result<std::unique_ptr<Comm>> split(int color, int key) override {
    auto sub = host_->split(color, key);
    if (!sub) return sub.status();
    Comm* raw = sub->get();
    return std::unique_ptr<Comm>(new StagedComm(raw, std::move(*sub), pool_));
  }
  [[noreturn]] void abort(int code) override {
    host_->abort(code);
    std::_Exit(code);  // abort() does not return; this is for the compiler
  }

 private:
  bool dev(const void* p) const { return p != nullptr && pool_->memory().is_device(p); }
  // A staging copy of `bytes` at `src` (device or host memory).
  Result<Staged> stage_in(const void* src, size_t bytes) {
    auto s = Staged::make(pool_, bytes);
    if (!s) return s;
    if (Status st = in(s->as<void>(), src, bytes); !st) return st;
    return s;
  }
  Status in(void* host, const void* src, size_t bytes) {
    if (bytes == 0) return Status::ok();
    if (dev(src)) return pool_->memory().to_host(host, src, bytes);
    std::memcpy(host, src, bytes);
    return Status::ok();
  }
  Status out(void* dst, const void* host, size_t bytes) {
    if (bytes == 0) return Status::ok();
    if (dev(dst)) return pool_->memory().to_device(dst, host, bytes);
    std::memcpy(dst, host, bytes);
    return Status::ok();
  }
  Request staged(Request inner, Staged buffer, std::function<Status()> after) {
    std::vector<Staged> bufs;
    bufs.push_back(std::move(buffer));
    return Request(
        std::make_unique<StagedRequest>(std::move(inner), std::move(bufs), std::move(after)));
  }

  std::shared_ptr<Pool> pool_;
};

}  // namespace

std::unique_ptr<Comm> make_staged_comm(Comm& host, std::shared_ptr<DeviceMemory> memory) {
  return std::make_unique<StagedComm>(&host, nullptr, std::make_shared<Pool>(std::move(memory)));
}

}  // namespace crucible::comm
