// The NCCL Comm (device_comm.h): one rank per GPU, collectives on the GPU's
// buffers in stream order, host buffers to the MPI Comm it wraps.
//
// Stream order: each call records an event on the kernels' stream, makes the
// Comm's own stream wait for it (the data is final), enqueues NCCL there and
// records a done event. wait() makes the kernels' stream wait for that event
// and returns at once: the host never blocks on NCCL, the next kernel that
// reads the result does, and a data-parallel bucket's reduction overlaps the
// backward kernels still queued behind it. test() asks whether the event has
// passed. Errors NCCL reports asynchronously (a peer gone, a network failure)
// are checked in every wait()/test() (ncclCommGetAsyncError); a Comm that saw
// one is aborted (ncclCommAbort), not destroyed, so no rank hangs in teardown.
//
// Mapping onto NCCL: uneven reduce-scatter and all-gather counts (ZeRO's last
// shard) become a group of per-root ncclReduce / ncclBroadcast calls; the bf16
// pieces a group of ncclSend/ncclRecv. Point to point on device buffers (the
// pipeline's activations and gradients) is staged through pinned memory over
// MPI (comm_staged.cc), not NCCL: NCCL has no tags and runs a rank's sends and
// receives in its stream's order, so a stage that posts a receive before the
// send its peer waits for (the schedules post receives early) would stall
// both streams; MPI's progress does not depend on that order.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <vector>

#include "comm/cuda/cuda_status.h"
#include "comm/device_comm.h"
#include "comm/wrapping_comm.h"
#include "core/trace.h"

namespace crucible::comm {
namespace {

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kSum:
      break;
  }
  return ncclSum;
}

struct Layout {
  std::vector<size_t> offsets;
  size_t total = 0;
  bool even = true;
};
Layout layout_of(const std::vector<size_t>& counts) {
  Layout l;
  for (size_t c : counts)
    l.offsets.push_back(l.total), l.total += c, l.even = l.even && c == counts[0];
  return l;
}

class NcclComm;

class NcclRequest final : public Request::Impl {
 public:
  NcclRequest(NcclComm* comm, cudaEvent_t done) : comm_(comm), done_(done) {}
  bool test(Status* status) override;
  Status wait() override;

 private:
  NcclComm* comm_;
  cudaEvent_t done_;
};

class NcclComm final : public detail::WrappingComm {
 public:
  NcclComm(Comm* host, std::unique_ptr<Comm> owned, ncclComm_t nccl, int device,
           cudaStream_t kernels)
      : WrappingComm(host, std::move(owned)), nccl_(nccl), device_(device), kernels_(kernels) {}
  ~NcclComm() override {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (stream_) cudaStreamDestroy(stream_);
    if (failed_)
      ncclCommAbort(nccl_);
    else
      ncclCommDestroy(nccl_);
  }
  Status start() {
    CRUCIBLE_RETURN_IF_ERROR(
        cuda_status("nccl", "cudaStreamCreateWithFlags",
                    cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)));
    auto memory = cuda_device_memory(device_, kernels_);
    if (!memory) return memory.status();
    p2p_ = make_staged_comm(*host_, std::move(*memory));
    return Status::ok();
  }

  std::string backend() const override { return "nccl"; }

  using WrappingComm::allreduce;  // the blocking float one: iallreduce, waited for
  Request iallreduce(float* data, size_t n, ReduceOp op) override {
    if (!dev(data)) return host_->iallreduce(data, n, op);
    return run("allreduce", [&] {
      return ncclAllReduce(data, data, n, ncclFloat, to_nccl(op), nccl_, stream_);
    });
  }
  Status allreduce(double* data, size_t n, ReduceOp op) override {
    if (!dev(data)) return host_->allreduce(data, n, op);
    return run("allreduce",
               [&] {
                 return ncclAllReduce(data, data, n, ncclDouble, to_nccl(op), nccl_, stream_);
               })
        .wait();
  }
  Request ireduce_scatter(const float* send, float* recv,
                          const std::vector<size_t>& counts) override {
    if (!dev(send) && !dev(recv)) return host_->ireduce_scatter(send, recv, counts);
    auto checked = detail::check_pieces("reduce_scatter", send, recv, counts, rank(), size());
    if (!checked) return Request::finished(checked.status());
    const Layout l = layout_of(counts);
    if (l.even)
      return run("reduce_scatter", [&] {
        return ncclReduceScatter(send, recv, counts[0], ncclFloat, ncclSum, nccl_, stream_);
      });
    return run("reduce_scatter", [&] {
      ncclGroupStart();
      for (int q = 0; q < size(); ++q) {
        if (counts[size_t(q)] == 0) continue;
        const float* in = send + l.offsets[size_t(q)];
        float* out = q == rank() ? recv : const_cast<float*>(in);  // used on the root only
        ncclResult_t r =
            ncclReduce(in, out, counts[size_t(q)], ncclFloat, ncclSum, q, nccl_, stream_);
        if (r != ncclSuccess) return ncclGroupEnd(), r;
      }
      return ncclGroupEnd();
    });
  }
  Request iallgather(const float* send, float* recv, const std::vector<size_t>& counts) override {
    if (!dev(send) && !dev(recv)) return host_->iallgather(send, recv, counts);
    auto checked = detail::check_pieces("allgather", recv, send, counts, rank(), size());
    if (!checked) return Request::finished(checked.status());
    return gather("allgather", send, recv, counts, ncclFloat);
  }
  Request ialltoall_pieces(const bf16* send, bf16* recv,
                           const std::vector<size_t>& counts) override {
    if (!dev(send) && !dev(recv)) return host_->ialltoall_pieces(send, recv, counts);
    if (counts.size() != size_t(size()))
      return host_->ialltoall_pieces(send, recv, counts);  // its error
    const Layout l = layout_of(counts);
    const size_t mine = counts[size_t(rank())];
    return run("alltoall_pieces", [&] {
      ncclGroupStart();
      for (int q = 0; q < size(); ++q) {
        ncclResult_t r = ncclSend(send + l.offsets[size_t(q)], counts[size_t(q)], ncclBfloat16, q,
                                  nccl_, stream_);
        if (r == ncclSuccess)
          r = ncclRecv(recv + size_t(q) * mine, mine, ncclBfloat16, q, nccl_, stream_);
        if (r != ncclSuccess) return ncclGroupEnd(), r;
      }
      return ncclGroupEnd();
    });
  }
  Request iallgather_pieces(bf16* recv, const std::vector<size_t>& counts) override {
    if (!dev(recv)) return host_->iallgather_pieces(recv, counts);
    const Layout l = layout_of(counts);
    return gather("allgather_pieces", recv + (counts.empty() ? 0 : l.offsets[size_t(rank())]), recv,
                  counts, ncclBfloat16);
  }
  Status broadcast(void* data, size_t bytes, int root) override {
    if (!dev(data)) return host_->broadcast(data, bytes, root);
    CRUCIBLE_RETURN_IF_ERROR(detail::check_peer("broadcast", "root", root, size()));
    return run("broadcast",
               [&] { return ncclBroadcast(data, data, bytes, ncclUint8, root, nccl_, stream_); })
        .wait();
  }
  Status allgather_bytes(const void* send, size_t bytes, void* recv) override {
    if (!dev(send) && !dev(recv)) return host_->allgather_bytes(send, bytes, recv);
    return run("allgather_bytes",
               [&] { return ncclAllGather(send, recv, bytes, ncclUint8, nccl_, stream_); })
        .wait();
  }
  // Point to point: host buffers to MPI, device buffers staged (above).
  Request isend(const void* data, size_t bytes, int dest, int tag) override {
    return p2p_->isend(data, bytes, dest, tag);
  }
  Request irecv(void* data, size_t bytes, int src, int tag) override {
    return p2p_->irecv(data, bytes, src, tag);
  }
  Status sendrecv(const void* send, size_t send_bytes, int dest, void* recv, size_t recv_bytes,
                  int src, int tag) override {
    return p2p_->sendrecv(send, send_bytes, dest, recv, recv_bytes, src, tag);
  }

  Result<std::unique_ptr<Comm>> split(int color, int key) override {
    auto host_sub = host_->split(color, key);  // refuses color < 0, like MPI
    if (!host_sub) return host_sub.status();
    ncclComm_t sub = nullptr;
    if (ncclResult_t r = ncclCommSplit(nccl_, color, key, &sub, nullptr); r != ncclSuccess)
      return error("split", "ncclCommSplit", r);
    Comm* raw = host_sub->get();
    auto comm = std::make_unique<NcclComm>(raw, std::move(*host_sub), sub, device_, kernels_);
    CRUCIBLE_RETURN_IF_ERROR(comm->start());
    return std::unique_ptr<Comm>(std::move(comm));
  }
  [[noreturn]] void abort(int code) override {
    ncclCommAbort(nccl_);  // frees the GPU's side before MPI ends the job
    host_->abort(code);
    std::_Exit(code);  // abort() does not return; this is for the compiler
  }

  // For NcclRequest: the kernels' stream waits for `done`; NCCL's async error.
  Status finish(cudaEvent_t done, bool wait) {
    Status s =
        wait ? cuda_status("nccl", "cudaStreamWaitEvent", cudaStreamWaitEvent(kernels_, done, 0))
             : Status::ok();
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(nccl_, &async);
    if (s.is_ok() && async != ncclSuccess && async != ncclInProgress)
      s = error("wait", "ncclCommGetAsyncError", async);
    events_.push_back(done);
    return s;
  }

 private:
  bool dev(const void* p) const { return p != nullptr && detail::on_cuda_device(p); }
  Status error(const char* op, const char* call, ncclResult_t r) {
    failed_ = true;
    return Status::internal(
        detail::nccl_error(op, call, rank(), size(), r, ncclGetLastError(nccl_)));
  }
  cudaEvent_t event() {
    if (events_.empty()) {
      cudaEvent_t e = nullptr;
      cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
      return e;
    }
    cudaEvent_t e = events_.back();
    events_.pop_back();
    return e;
  }
  // Orders `enqueue`'s NCCL work after the kernels queued so far.
  template <typename F>
  Request run(const char* op, F&& enqueue) {
    trace::Scope scope(op, "comm");
    cudaEvent_t ready = event();
    Status s = cuda_status(op, "cudaEventRecord", cudaEventRecord(ready, kernels_));
    if (s) s = cuda_status(op, "cudaStreamWaitEvent", cudaStreamWaitEvent(stream_, ready, 0));
    events_.push_back(ready);  // reusable once recorded and waited on
    if (!s) return Request::finished(s);
    if (ncclResult_t r = enqueue(); r != ncclSuccess) return Request::finished(error(op, op, r));
    cudaEvent_t done = event();
    if (Status d = cuda_status(op, "cudaEventRecord", cudaEventRecord(done, stream_)); !d)
      return Request::finished(d);
    return Request(std::make_unique<NcclRequest>(this, done));
  }
  template <typename T>
  Request gather(const char* op, const T* send, T* recv, const std::vector<size_t>& counts,
                 ncclDataType_t type) {
    const Layout l = layout_of(counts);
    if (l.even)
      return run(op, [&] { return ncclAllGather(send, recv, counts[0], type, nccl_, stream_); });
    return run(op, [&] {
      ncclGroupStart();
      for (int q = 0; q < size(); ++q) {
        if (counts[size_t(q)] == 0) continue;
        T* piece = recv + l.offsets[size_t(q)];
        ncclResult_t r = ncclBroadcast(q == rank() ? send : piece, piece, counts[size_t(q)], type,
                                       q, nccl_, stream_);
        if (r != ncclSuccess) return ncclGroupEnd(), r;
      }
      return ncclGroupEnd();
    });
  }

  ncclComm_t nccl_;
  int device_;
  cudaStream_t kernels_, stream_ = nullptr;
  std::vector<cudaEvent_t> events_;  // free events
  std::unique_ptr<Comm> p2p_;        // the staged Comm over host_, for point to point
  bool failed_ = false;
};

bool NcclRequest::test(Status* status) {
  cudaError_t q = cudaEventQuery(done_);
  if (q == cudaErrorNotReady) return false;
  *status =
      q == cudaSuccess ? comm_->finish(done_, false) : cuda_status("nccl", "cudaEventQuery", q);
  return true;
}
Status NcclRequest::wait() { return comm_->finish(done_, true); }

}  // namespace

Result<std::unique_ptr<Comm>> make_nccl_comm(Comm& host, int device, CUstream_st* stream) {
  CRUCIBLE_RETURN_IF_ERROR(cuda_status("nccl", "cudaSetDevice", cudaSetDevice(device)));
  ncclUniqueId id;
  CRUCIBLE_RETURN_IF_ERROR(detail::share_unique_id(host, &id, sizeof(id), [&](void* p) {
    ncclResult_t r = ncclGetUniqueId(static_cast<ncclUniqueId*>(p));
    return r == ncclSuccess
               ? Status::ok()
               : Status::internal(detail::nccl_error("bootstrap", "ncclGetUniqueId", host.rank(),
                                                     host.size(), r, ncclGetLastError(nullptr)));
  }));
  ncclComm_t nccl = nullptr;
  if (ncclResult_t r = ncclCommInitRank(&nccl, host.size(), id, host.rank()); r != ncclSuccess)
    return Status::internal(detail::nccl_error("bootstrap", "ncclCommInitRank", host.rank(),
                                               host.size(), r, ncclGetLastError(nullptr)));
  auto comm = std::make_unique<NcclComm>(&host, nullptr, nccl, device, stream);
  CRUCIBLE_RETURN_IF_ERROR(comm->start());
  return std::unique_ptr<Comm>(std::move(comm));
}

}  // namespace crucible::comm
