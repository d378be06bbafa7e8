// What the device Comms (comm/device_comm.h) share: the MPI Comm of the same
// ranks they wrap (owned when they are a split's), its rank and size and
// barrier, and each blocking call as its non-blocking twin waited for.
// Internal to comm.
#pragma once
#include <memory>
#include <utility>
#include <vector>

#include "comm/comm.h"

namespace crucible::comm::detail {

class WrappingComm : public Comm {
 public:
  // `host` must outlive this Comm; `owned`, when given, is `host` itself.
  WrappingComm(Comm* host, std::unique_ptr<Comm> owned) : host_(host), owned_(std::move(owned)) {}

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  Status barrier() override { return host_->barrier(); }

  Status allreduce(float* data, size_t n, ReduceOp op) override {
    return iallreduce(data, n, op).wait();
  }
  Status reduce_scatter(const float* send, float* recv,
                        const std::vector<size_t>& counts) override {
    return ireduce_scatter(send, recv, counts).wait();
  }
  Status allgather(const float* send, float* recv, const std::vector<size_t>& counts) override {
    return iallgather(send, recv, counts).wait();
  }
  Status send(const void* data, size_t bytes, int dest, int tag) override {
    return isend(data, bytes, dest, tag).wait();
  }
  Status recv(void* data, size_t bytes, int src, int tag) override {
    return irecv(data, bytes, src, tag).wait();
  }
  using Comm::allreduce;  // the double overload stays each backend's own

 protected:
  Comm* host_;
  std::unique_ptr<Comm> owned_;  // a split's MPI sub-Comm
};

}  // namespace crucible::comm::detail
