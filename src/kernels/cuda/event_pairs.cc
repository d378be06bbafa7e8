#include "kernels/cuda/event_pairs.h"

#include "core/clock.h"
#include "core/trace.h"

namespace crucible::kernels::cuda {

EventPairs::~EventPairs() { release(); }

void EventPairs::release() {
  for (cudaEvent_t e : begin_)
    if (e) cudaEventDestroy(e);
  for (cudaEvent_t e : end_)
    if (e) cudaEventDestroy(e);
  if (now_) cudaEventDestroy(now_);
}

bool EventPairs::make() {
  std::lock_guard lock(mu_);
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (device_ == dev) return true;
  release();
  begin_.assign(size_t(pairs_), nullptr);
  end_.assign(size_t(pairs_), nullptr);
  now_ = nullptr;
  device_ = -1;
  for (int i = 0; i < pairs_; ++i)
    if (cudaEventCreate(&begin_[size_t(i)]) != cudaSuccess ||
        cudaEventCreate(&end_[size_t(i)]) != cudaSuccess)
      return false;
  if (cudaEventCreate(&now_) != cudaSuccess) return false;
  pending_.clear();
  pending_.reserve(size_t(pairs_));
  device_ = dev;
  track_ = trace::named_track("cuda:" + std::to_string(dev) + " " + track_name_);
  return true;
}

int EventPairs::begin(cudaStream_t s) {
  std::lock_guard lock(mu_);
  if (device_ < 0) return -1;
  if (pending_.size() >= size_t(pairs_)) {
    ++dropped_;
    return -1;
  }
  const int slot = int(pending_.size());
  cudaEventRecordWithFlags(begin_[size_t(slot)], s, record_flags_);
  pending_.push_back(-1);
  return slot;
}

void EventPairs::end(int slot, int tag, cudaStream_t s) {
  if (slot < 0) return;
  std::lock_guard lock(mu_);
  if (size_t(slot) >= pending_.size())
    return;  // collected in between: the pair is lost, not misread
  cudaEventRecordWithFlags(end_[size_t(slot)], s, record_flags_);
  pending_[size_t(slot)] = tag;
}

Result<int64_t> EventPairs::collect(cudaStream_t s, const std::function<void(const Span&)>& each, bool keep) {
  std::lock_guard lock(mu_);
  const int64_t dropped = dropped_;
  dropped_ = 0;
  if (pending_.empty()) return dropped;
  if (cudaError_t e = cudaStreamSynchronize(s); e != cudaSuccess) {
    pending_.clear();
    return Status::invalid(std::string("[cuda] event timing: stream synchronize: ") +
                           cudaGetErrorString(e));
  }
  cudaEventRecord(now_, s);
  cudaEventSynchronize(now_);
  const int64_t host_now = now_ns();
  for (size_t i = 0; i < pending_.size(); ++i) {
    float ms = 0, before_now = 0;
    if (pending_[i] < 0 || cudaEventElapsedTime(&ms, begin_[i], end_[i]) != cudaSuccess) {
      cudaGetLastError();  // a span begun and never ended: skipped
      continue;
    }
    if (cudaEventElapsedTime(&before_now, begin_[i], now_) != cudaSuccess) {
      cudaGetLastError();
      before_now = 0;
    }
    each({pending_[i], int64_t(double(ms) * 1e6), host_now - int64_t(double(before_now) * 1e6)});
  }
  if (!keep) pending_.clear();
  return dropped;
}

void EventPairs::discard() {
  std::lock_guard lock(mu_);
  pending_.clear();
}

}  // namespace crucible::kernels::cuda
