// Request, the shared argument checks, the single-process Comm and world().
#include "comm/comm.h"

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/process.h"
#include "core/trace.h"

namespace crucible::comm {

// ---- Request ----

Request::Request() = default;
Request::Request(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Request Request::finished(Status status) {
  Request r;
  r.status_ = std::move(status);
  return r;
}
Request::Request(Request&& other) noexcept
    : impl_(std::move(other.impl_)), status_(std::move(other.status_)) {}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    if (impl_) {
      Status s = wait();
      if (!s.is_ok()) std::fprintf(stderr, "%s (request replaced)\n", s.message().c_str());
    }
    impl_ = std::move(other.impl_);
    status_ = std::move(other.status_);
  }
  return *this;
}

Request::~Request() {
  if (impl_) {
    Status s = wait();
    if (!s.is_ok()) std::fprintf(stderr, "%s (request destroyed)\n", s.message().c_str());
  }
}

Status Request::wait() {
  if (impl_) {
    trace::Scope scope("wait", "comm");
    status_ = impl_->wait();
    impl_.reset();
  }
  return status_;
}

bool Request::test() {
  if (!impl_) return true;
  Status s;
  if (!impl_->test(&s)) return false;
  status_ = std::move(s);
  impl_.reset();
  return true;
}

// ---- limits and argument checks ----

namespace {
constexpr size_t kMaxCountPerCall = INT_MAX / 2;  // 2^30 - 1
std::atomic<size_t> g_max_count{kMaxCountPerCall};

bool env_set(const char* name) { return std::getenv(name) != nullptr; }
long env_long(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::strtol(v, nullptr, 10) : 0;
}
}  // namespace

size_t max_count_per_call() { return g_max_count.load(std::memory_order_relaxed); }

namespace detail {

size_t set_max_count_per_call_for_testing(size_t n) {
  if (n == 0 || n > kMaxCountPerCall) n = kMaxCountPerCall;
  return g_max_count.exchange(n);
}

Result<PieceLayout> check_pieces(const char* op, const float* full, const float* piece,
                                 const std::vector<size_t>& counts, int rank, int size) {
  if (counts.size() != static_cast<size_t>(size))
    return Status::invalid(std::string("[dist] ") + op + ": " + std::to_string(counts.size()) +
                           " counts for a world of " + std::to_string(size) + " ranks");
  PieceLayout l;
  for (int r = 0; r < size; ++r) {
    if (r == rank) l.offset = l.total;
    l.total += counts[r];
  }
  l.count = counts[rank];
  if (l.total > 0 && full == nullptr)
    return Status::invalid(std::string("[dist] ") + op + ": null buffer of " +
                           std::to_string(l.total) + " floats");
  if (l.count > 0 && piece == nullptr)
    return Status::invalid(std::string("[dist] ") + op + ": null buffer for this rank's " +
                           std::to_string(l.count) + " floats");
  // Unrelated pointers are compared as integers; only exact aliasing of this
  // rank's piece is meaningful (MPI_IN_PLACE), any other overlap is a bug. A
  // rank with an empty piece is in place when it passes the aliasing pointer,
  // so that every rank of an in-place call says MPI_IN_PLACE (MPI asks that).
  uintptr_t f0 = reinterpret_cast<uintptr_t>(full), f1 = f0 + l.total * sizeof(float);
  uintptr_t p0 = reinterpret_cast<uintptr_t>(piece), p1 = p0 + l.count * sizeof(float);
  if (full != nullptr && p0 == f0 + l.offset * sizeof(float)) {
    l.in_place = true;
  } else if (l.count > 0) {
    if (p0 < f1 && f0 < p1) {
      return Status::invalid(std::string("[dist] ") + op +
                             ": buffers overlap other than in place (this rank's piece must "
                             "alias the full buffer at offset " +
                             std::to_string(l.offset) + " or not at all)");
    }
  }
  return l;
}

Status check_peer(const char* op, const char* role, int peer, int size) {
  if (peer < 0 || peer >= size)
    return Status::invalid(std::string("[dist] ") + op + ": " + role + " " + std::to_string(peer) +
                           " is not a rank of a world of " + std::to_string(size));
  return Status::ok();
}

Status check_buffer(const char* op, const void* data, size_t n) {
  if (n > 0 && data == nullptr)
    return Status::invalid(std::string("[dist] ") + op + ": null buffer of " + std::to_string(n) +
                           " elements");
  return Status::ok();
}

}  // namespace detail

// ---- single process ----

namespace {

// World of one: reductions are identities, scatters and gathers copies.
class SingleComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single"; }

  Status allreduce(float* data, size_t n, ReduceOp) override {
    return detail::check_buffer("allreduce", data, n);
  }
  Request iallreduce(float* data, size_t n, ReduceOp op) override {
    return Request::finished(allreduce(data, n, op));
  }
  Status reduce_scatter(const float* send, float* recv,
                        const std::vector<size_t>& counts) override {
    return copy_piece("reduce_scatter", send, recv, recv, counts);
  }
  Request ireduce_scatter(const float* send, float* recv,
                          const std::vector<size_t>& counts) override {
    return Request::finished(reduce_scatter(send, recv, counts));
  }
  Status allgather(const float* send, float* recv, const std::vector<size_t>& counts) override {
    return copy_piece("allgather", recv, send, recv, counts);
  }
  Request iallgather(const float* send, float* recv, const std::vector<size_t>& counts) override {
    return Request::finished(allgather(send, recv, counts));
  }
  Request ialltoall_pieces(const bf16* send, bf16* recv, const std::vector<size_t>& counts) override {
    if (counts.size() != 1) return Request::finished(Status::invalid("[dist] ialltoall_pieces: counts for one rank"));
    if (counts[0] > 0 && send != recv) std::memmove(recv, send, counts[0] * sizeof(bf16));
    return Request();
  }
  Request iallgather_pieces(bf16*, const std::vector<size_t>& counts) override {
    if (counts.size() != 1) return Request::finished(Status::invalid("[dist] iallgather_pieces: counts for one rank"));
    return Request();
  }
  Status allreduce(double* data, size_t n, ReduceOp) override {
    return detail::check_buffer("allreduce", data, n);
  }
  Status broadcast(void* data, size_t bytes, int root) override {
    CRUCIBLE_RETURN_IF_ERROR(detail::check_peer("broadcast", "root", root, 1));
    return detail::check_buffer("broadcast", data, bytes);
  }
  Status allgather_bytes(const void* send, size_t bytes, void* recv) override {
    CRUCIBLE_RETURN_IF_ERROR(detail::check_buffer("allgather_bytes", send, bytes));
    CRUCIBLE_RETURN_IF_ERROR(detail::check_buffer("allgather_bytes", recv, bytes));
    if (bytes > 0 && send != recv) std::memmove(recv, send, bytes);
    return Status::ok();
  }
  Status send(const void*, size_t, int dest, int) override {
    CRUCIBLE_RETURN_IF_ERROR(detail::check_peer("send", "dest", dest, 1));
    return Status::invalid(
        "[dist] send: a single-process world has no other rank, and a send to itself would "
        "never be received (use sendrecv)");
  }
  Status recv(void*, size_t, int src, int) override {
    CRUCIBLE_RETURN_IF_ERROR(detail::check_peer("recv", "src", src, 1));
    return Status::invalid(
        "[dist] recv: a single-process world has no other rank to receive from (use sendrecv)");
  }
  Request isend(const void* data, size_t bytes, int dest, int tag) override {
    return Request::finished(send(data, bytes, dest, tag));
  }
  Request irecv(void* data, size_t bytes, int src, int tag) override {
    return Request::finished(recv(data, bytes, src, tag));
  }
  Result<std::unique_ptr<Comm>> split(int color, int) override {
    if (color < 0) return Status::invalid("[dist] split: color " + std::to_string(color) + " must be >= 0");
    return make_single_comm();
  }
  Status sendrecv(const void* send, size_t send_bytes, int dest, void* recv, size_t recv_bytes,
                  int src, int) override {
    CRUCIBLE_RETURN_IF_ERROR(detail::check_peer("sendrecv", "dest", dest, 1));
    CRUCIBLE_RETURN_IF_ERROR(detail::check_peer("sendrecv", "src", src, 1));
    CRUCIBLE_RETURN_IF_ERROR(detail::check_buffer("sendrecv", send, send_bytes));
    CRUCIBLE_RETURN_IF_ERROR(detail::check_buffer("sendrecv", recv, recv_bytes));
    if (send_bytes != recv_bytes)
      return Status::invalid("[dist] sendrecv: received a message of " +
                             std::to_string(send_bytes) + " bytes, expected " +
                             std::to_string(recv_bytes));
    if (send_bytes > 0 && send != recv) std::memmove(recv, send, send_bytes);
    return Status::ok();
  }
  Status barrier() override { return Status::ok(); }
  [[noreturn]] void abort(int code) override {
    std::fflush(nullptr);
    std::_Exit(code);
  }

 private:
  // full/piece as in detail::check_pieces; copies src -> dst (one of them is
  // the piece, the other the full buffer at offset 0, since rank 0 is first).
  static Status copy_piece(const char* op, const float* full, const float* piece, float* dst,
                           const std::vector<size_t>& counts) {
    auto layout = detail::check_pieces(op, full, piece, counts, 0, 1);
    if (!layout) return layout.status();
    if (layout->count > 0 && !layout->in_place) {
      const float* src = dst == piece ? full : piece;
      std::memcpy(dst, src, layout->count * sizeof(float));
    }
    return Status::ok();
  }
};

}  // namespace

std::unique_ptr<Comm> make_single_comm() { return std::make_unique<SingleComm>(); }

bool launched_by_mpi() {
  if (env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMIX_RANK") || env_set("PMI_RANK")) return true;
  // srun without an MPI plugin still sets SLURM_PROCID; a batch script's own
  // process also has SLURM_PROCID=0 but no step of more than one task.
  if (env_set("SLURM_PROCID")) {
    long tasks = env_set("SLURM_STEP_NUM_TASKS") ? env_long("SLURM_STEP_NUM_TASKS")
                                                 : env_long("SLURM_NTASKS");
    return tasks > 1;
  }
  return false;
}

Result<Comm*> world() {
  // Built on first use, destroyed (MPI finalised) at exit.
  struct World {
    std::unique_ptr<Comm> comm;
    Status status;
  };
  static World w = [] {
    World made;
    if (!launched_by_mpi()) {
      made.comm = make_single_comm();
      return made;
    }
    auto mpi = detail::make_mpi_world();
    if (mpi)
      made.comm = std::move(mpi).value();
    else
      made.status = mpi.status();
    return made;
  }();
  if (!w.comm) return w.status;
  return w.comm.get();
}

Result<std::vector<std::string>> host_names(Comm& comm) {
  constexpr size_t kNameBytes = 256;
  char mine[kNameBytes] = {0};
  const std::string me = host_name();
  std::strncpy(mine, me.c_str(), kNameBytes - 1);
  std::vector<char> all(kNameBytes * size_t(comm.size()));
  CRUCIBLE_RETURN_IF_ERROR(comm.allgather_bytes(mine, kNameBytes, all.data()));
  std::vector<std::string> names;
  for (int r = 0; r < comm.size(); ++r) names.emplace_back(all.data() + size_t(r) * kNameBytes);
  return names;
}

Status quiet_barrier(Comm& comm, std::chrono::microseconds poll) {
  float x = 0;
  Request r = comm.iallreduce(&x, 1);
  while (!r.test()) std::this_thread::sleep_for(poll);
  return r.wait();
}

}  // namespace crucible::comm
