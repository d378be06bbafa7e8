// The MPI Comm (Open MPI). The only file of crucible that includes <mpi.h>.
//
// Every MPI call goes through CRUCIBLE_MPI, which turns a non-success code into
// a Status naming the operation, the MPI call, file:line, the rank and MPI's
// error string (MPI_ERRORS_RETURN is set, so errors come back as codes).
// Collectives run on a duplicate of MPI_COMM_WORLD, so a program's own MPI
// traffic on MPI_COMM_WORLD never matches crucible's.
#define OMPI_SKIP_MPICXX 1  // the deprecated C++ bindings: not used, not linked
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/trace.h"
#include "comm/comm.h"
#include "comm/mpi_malloc.h"

namespace crucible::comm {
namespace {

// "src/comm/comm_mpi.cc" rather than the absolute path the build passes.
const char* short_path(const char* file) {
  const char* s = std::strstr(file, "src/");
  return s ? s : file;
}

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, len);
}

// Turns MPI return codes into Status; knows the rank for the message.
struct ErrorContext {
  int rank = 0, size = 0;

  // statuses: those of a Waitall/Testall, consulted for MPI_ERR_IN_STATUS.
  Status check(int rc, const char* op, const char* call, const char* file, int line,
               const std::vector<MPI_Status>* statuses = nullptr) const {
    if (rc == MPI_SUCCESS) return Status::ok();
    if (rc == MPI_ERR_IN_STATUS && statuses) {
      for (const MPI_Status& st : *statuses)
        if (st.MPI_ERROR != MPI_SUCCESS && st.MPI_ERROR != MPI_ERR_PENDING) {
          rc = st.MPI_ERROR;
          break;
        }
    }
    return Status::error(Code::kUnavailable,
                         std::string("[dist] ") + op + ": " + call + " failed (" +
                             short_path(file) + ":" + std::to_string(line) + ", rank " +
                             std::to_string(rank) + " of " + std::to_string(size) +
                             "): " + mpi_error_string(rc));
  }
};

#define CRUCIBLE_MPI(op, fn, ...) \
  CRUCIBLE_RETURN_IF_ERROR(err_.check(fn(__VA_ARGS__), op, #fn, __FILE__, __LINE__))

MPI_Op to_mpi(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
  }
  return MPI_SUM;
}

// Non-blocking collectives split in chunks are several MPI requests; the
// count/displacement arrays of v-collectives must live until completion.
class MpiRequest final : public Request::Impl {
 public:
  MpiRequest(ErrorContext err, const char* op) : err_(err), op_(op) {}
  std::vector<MPI_Request> reqs;
  std::vector<int> counts, displs;
  std::function<void()> on_success;  // e.g. moving an in-place result into place
  // Checks the completed statuses (a receive's message sizes).
  std::function<Status(const std::vector<MPI_Status>&)> check_statuses;

  bool test(Status* status) override {
    int flag = 0;
    std::vector<MPI_Status> st(reqs.size());
    int rc = MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &flag, st.data());
    if (rc == MPI_SUCCESS && !flag) return false;
    *status = finish(err_.check(rc, op_, "MPI_Testall", __FILE__, __LINE__, &st), st);
    return true;
  }
  Status wait() override {
    // One MPI_Wait per request, not MPI_Waitall: Open MPI 4.1's Waitall spins
    // forever on a receive that completed with MPI_ERR_TRUNCATE.
    std::vector<MPI_Status> st(reqs.size());
    Status first;
    for (size_t i = 0; i < reqs.size(); ++i) {
      int rc = MPI_Wait(&reqs[i], &st[i]);
      if (rc != MPI_SUCCESS && first.is_ok()) first = err_.check(rc, op_, "MPI_Wait", __FILE__, __LINE__);
    }
    return finish(first, st);
  }

 private:
  Status finish(Status s, const std::vector<MPI_Status>& st) {
    if (s.is_ok() && check_statuses) s = check_statuses(st);
    if (s.is_ok() && on_success) on_success();
    return s;
  }
  ErrorContext err_;
  const char* op_;
};

// Open MPI allocates temporaries as large as the message (measured: a 40 MiB
// allreduce at 2 ranks mallocs 40 MiB per call); above glibc's mmap threshold
// (at most 32 MiB) they are fresh mmaps, page-faulted on every call. Allreduce
// therefore goes in equal segments of at most 24 MiB (a 25 MB data-parallel
// bucket is one), whose temporaries the heap reuses.
constexpr size_t kAllreduceSegmentBytes = size_t{24} << 20;

class MpiComm final : public Comm {
 public:
  static Result<std::unique_ptr<Comm>> create();
  ~MpiComm() override;

  int rank() const override { return err_.rank; }
  int size() const override { return err_.size; }
  std::string backend() const override { return "mpi"; }

  Status allreduce(float* data, size_t n, ReduceOp op) override {
    trace::Scope scope("allreduce", "comm");
    return allreduce_chunked(data, n, MPI_FLOAT, op);
  }
  Status allreduce(double* data, size_t n, ReduceOp op) override {
    trace::Scope scope("allreduce", "comm");
    return allreduce_chunked(data, n, MPI_DOUBLE, op);
  }
  Request iallreduce(float* data, size_t n, ReduceOp op) override;
  Status reduce_scatter(const float* send, float* recv, const std::vector<size_t>& counts) override;
  Request ireduce_scatter(const float* send, float* recv,
                          const std::vector<size_t>& counts) override;
  Status allgather(const float* send, float* recv, const std::vector<size_t>& counts) override;
  Request iallgather(const float* send, float* recv, const std::vector<size_t>& counts) override;
  Request ialltoall_pieces(const bf16* send, bf16* recv, const std::vector<size_t>& counts) override;
  Request iallgather_pieces(bf16* recv, const std::vector<size_t>& counts) override;
  Request pieces(const char* op, const char* call, const std::vector<size_t>& counts,
                 const std::function<int(MpiRequest&, MPI_Request*)>& start);
  Status broadcast(void* data, size_t bytes, int root) override;
  Status allgather_bytes(const void* send, size_t bytes, void* recv) override;
  Status send(const void* data, size_t bytes, int dest, int tag) override {
    trace::Scope scope("send", "comm");
    return isend(data, bytes, dest, tag).wait();
  }
  Status recv(void* data, size_t bytes, int src, int tag) override {
    trace::Scope scope("recv", "comm");
    return irecv(data, bytes, src, tag).wait();
  }
  Request isend(const void* data, size_t bytes, int dest, int tag) override;
  Request irecv(void* data, size_t bytes, int src, int tag) override;
  Result<std::unique_ptr<Comm>> split(int color, int key) override;
  Status sendrecv(const void* send, size_t send_bytes, int dest, void* recv, size_t recv_bytes,
                  int src, int tag) override;
  Status barrier() override {
    trace::Scope scope("barrier", "comm");
    CRUCIBLE_MPI("barrier", MPI_Barrier, comm_);
    return Status::ok();
  }
  [[noreturn]] void abort(int code) override {
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this is for the compiler
  }

 private:
  MpiComm(MPI_Comm comm, bool owns_mpi, int rank, int size)
      : comm_(comm), owns_mpi_(owns_mpi), err_{rank, size} {}
  Status allreduce_chunked(void* data, size_t n, MPI_Datatype type, ReduceOp op);
  // Elements per MPI call for an allreduce of n: segments of equal size (no
  // small tail) within kAllreduceSegmentBytes and the per-call limit.
  static size_t allreduce_segment(size_t n, size_t type_size) {
    const size_t max = std::min(max_count_per_call(), kAllreduceSegmentBytes / type_size);
    const size_t segments = (n + max - 1) / max;
    return segments == 0 ? max : (n + segments - 1) / segments;
  }
  Status check_tag(const char* op, int tag) const;
  // Chunk lengths of a point-to-point message: at least one (a zero-byte
  // message still pairs a send with its recv).
  std::vector<int> message_chunks(size_t bytes) const;
  Status check_received(const char* op, const MPI_Status& st, int expected) const;

  MPI_Comm comm_;
  bool owns_mpi_;  // we called MPI_Init, so we call MPI_Finalize
  ErrorContext err_;
};

Result<std::unique_ptr<Comm>> MpiComm::create() {
  ErrorContext boot{-1, -1};
  int initialized = 0;
  MPI_Initialized(&initialized);
  bool owns = false;
  if (!initialized) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
      Status s = boot.check(rc, "init", "MPI_Init_thread", __FILE__, __LINE__);
      return Status::error(Code::kUnavailable,
                           s.message() +
                               "; this process looks started by mpirun/srun (launched_by_mpi): "
                               "is the launcher the Open MPI crucible was built with?");
    }
    owns = true;
    if (provided < MPI_THREAD_FUNNELED)
      return Status::error(Code::kUnavailable, "[dist] init: MPI provides thread level " +
                                                   std::to_string(provided) +
                                                   ", crucible needs MPI_THREAD_FUNNELED");
  }
  ErrorContext& err_ = boot;  // for CRUCIBLE_MPI
  CRUCIBLE_MPI("init", MPI_Comm_set_errhandler, MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  CRUCIBLE_MPI("init", MPI_Comm_rank, MPI_COMM_WORLD, &boot.rank);
  CRUCIBLE_MPI("init", MPI_Comm_size, MPI_COMM_WORLD, &boot.size);
  tune_malloc_for_mpi(boot.rank);
  MPI_Comm comm;
  CRUCIBLE_MPI("init", MPI_Comm_dup, MPI_COMM_WORLD, &comm);
  CRUCIBLE_MPI("init", MPI_Comm_set_errhandler, comm, MPI_ERRORS_RETURN);
  return std::unique_ptr<Comm>(new MpiComm(comm, owns, boot.rank, boot.size));
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // the program finalised MPI itself
  MPI_Comm_free(&comm_);
  if (owns_mpi_) MPI_Finalize();
}

Status MpiComm::allreduce_chunked(void* data, size_t n, MPI_Datatype type, ReduceOp op) {
  CRUCIBLE_RETURN_IF_ERROR(detail::check_buffer("allreduce", data, n));
  int type_size = 0;
  CRUCIBLE_MPI("allreduce", MPI_Type_size, type, &type_size);
  const size_t max = allreduce_segment(n, type_size);
  for (size_t i = 0; i < n; i += max) {
    int c = static_cast<int>(std::min(max, n - i));
    CRUCIBLE_MPI("allreduce", MPI_Allreduce, MPI_IN_PLACE, static_cast<char*>(data) + i * type_size,
                 c, type, to_mpi(op), comm_);
  }
  return Status::ok();
}

Request MpiComm::iallreduce(float* data, size_t n, ReduceOp op) {
  Status s = detail::check_buffer("iallreduce", data, n);
  if (!s.is_ok()) return Request::finished(s);
  if (n == 0) return Request();
  auto req = std::make_unique<MpiRequest>(err_, "iallreduce");
  const size_t max = allreduce_segment(n, sizeof(float));
  for (size_t i = 0; i < n; i += max) {
    int c = static_cast<int>(std::min(max, n - i));
    MPI_Request r;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, data + i, c, MPI_FLOAT, to_mpi(op), comm_, &r);
    if (rc != MPI_SUCCESS) {
      // Chunks already started must finish before their buffers may be reused.
      Request started(std::move(req));
      (void)started.wait();
      return Request::finished(err_.check(rc, "iallreduce", "MPI_Iallreduce", __FILE__, __LINE__));
    }
    req->reqs.push_back(r);
  }
  return Request(std::move(req));
}

Status MpiComm::reduce_scatter(const float* send, float* recv, const std::vector<size_t>& counts) {
  trace::Scope scope("reduce_scatter", "comm");
  auto l = detail::check_pieces("reduce_scatter", send, recv, counts, rank(), size());
  if (!l) return l.status();
  if (l->total == 0) return Status::ok();
  const size_t max = max_count_per_call();
  if (l->total <= max) {
    std::vector<int> rc(counts.begin(), counts.end());
    if (l->in_place) {
      // MPI_IN_PLACE takes the input from recvbuf (all sum(counts) floats) and
      // leaves this rank's result at its start.
      float* base = recv - l->offset;
      CRUCIBLE_MPI("reduce_scatter", MPI_Reduce_scatter, MPI_IN_PLACE, base, rc.data(), MPI_FLOAT,
                   MPI_SUM, comm_);
      if (l->offset > 0 && l->count > 0) std::memmove(recv, base, l->count * sizeof(float));
    } else {
      CRUCIBLE_MPI("reduce_scatter", MPI_Reduce_scatter, send, recv, rc.data(), MPI_FLOAT, MPI_SUM,
                   comm_);
    }
    return Status::ok();
  }
  // Beyond int counts: one chunked reduce to each rank in turn.
  size_t off = 0;
  for (int r = 0; r < size(); ++r) {
    for (size_t i = 0; i < counts[r]; i += max) {
      int c = static_cast<int>(std::min(max, counts[r] - i));
      if (r != rank()) {
        CRUCIBLE_MPI("reduce_scatter", MPI_Reduce, send + off + i, nullptr, c, MPI_FLOAT, MPI_SUM,
                     r, comm_);
      } else if (l->in_place) {
        CRUCIBLE_MPI("reduce_scatter", MPI_Reduce, MPI_IN_PLACE, recv + i, c, MPI_FLOAT, MPI_SUM, r,
                     comm_);
      } else {
        CRUCIBLE_MPI("reduce_scatter", MPI_Reduce, send + off + i, recv + i, c, MPI_FLOAT, MPI_SUM,
                     r, comm_);
      }
    }
    off += counts[r];
  }
  return Status::ok();
}

Request MpiComm::ireduce_scatter(const float* send, float* recv,
                                 const std::vector<size_t>& counts) {
  auto l = detail::check_pieces("ireduce_scatter", send, recv, counts, rank(), size());
  if (!l) return Request::finished(l.status());
  if (l->total == 0) return Request();
  if (l->total > max_count_per_call())
    return Request::finished(Status::invalid(
        "[dist] ireduce_scatter: " + std::to_string(l->total) +
        " floats exceed the per-call limit of MPI's int counts (" +
        std::to_string(max_count_per_call()) + "); use the blocking reduce_scatter"));
  auto req = std::make_unique<MpiRequest>(err_, "ireduce_scatter");
  req->counts.assign(counts.begin(), counts.end());
  MPI_Request r;
  int rc;
  if (l->in_place) {
    float* base = recv - l->offset;
    rc = MPI_Ireduce_scatter(MPI_IN_PLACE, base, req->counts.data(), MPI_FLOAT, MPI_SUM, comm_, &r);
    size_t n = l->count;
    if (l->offset > 0 && n > 0)
      req->on_success = [recv, base, n] { std::memmove(recv, base, n * sizeof(float)); };
  } else {
    rc = MPI_Ireduce_scatter(send, recv, req->counts.data(), MPI_FLOAT, MPI_SUM, comm_, &r);
  }
  if (rc != MPI_SUCCESS)
    return Request::finished(
        err_.check(rc, "ireduce_scatter", "MPI_Ireduce_scatter", __FILE__, __LINE__));
  req->reqs.push_back(r);
  return Request(std::move(req));
}

Status MpiComm::allgather(const float* send, float* recv, const std::vector<size_t>& counts) {
  trace::Scope scope("allgather", "comm");
  auto l = detail::check_pieces("allgather", recv, send, counts, rank(), size());
  if (!l) return l.status();
  if (l->total == 0) return Status::ok();
  const size_t max = max_count_per_call();
  if (l->total <= max) {
    std::vector<int> rc(counts.begin(), counts.end()), displs(counts.size());
    for (size_t r = 1; r < counts.size(); ++r) displs[r] = displs[r - 1] + rc[r - 1];
    CRUCIBLE_MPI("allgather", MPI_Allgatherv, l->in_place ? MPI_IN_PLACE : send,
                 static_cast<int>(l->count), MPI_FLOAT, recv, rc.data(), displs.data(), MPI_FLOAT,
                 comm_);
    return Status::ok();
  }
  // Beyond int counts/displacements: each rank broadcasts its piece in chunks.
  if (!l->in_place && l->count > 0) std::memcpy(recv + l->offset, send, l->count * sizeof(float));
  size_t off = 0;
  for (int r = 0; r < size(); ++r) {
    for (size_t i = 0; i < counts[r]; i += max) {
      int c = static_cast<int>(std::min(max, counts[r] - i));
      CRUCIBLE_MPI("allgather", MPI_Bcast, recv + off + i, c, MPI_FLOAT, r, comm_);
    }
    off += counts[r];
  }
  return Status::ok();
}

Request MpiComm::iallgather(const float* send, float* recv, const std::vector<size_t>& counts) {
  auto l = detail::check_pieces("iallgather", recv, send, counts, rank(), size());
  if (!l) return Request::finished(l.status());
  if (l->total == 0) return Request();
  if (l->total > max_count_per_call())
    return Request::finished(
        Status::invalid("[dist] iallgather: " + std::to_string(l->total) +
                        " floats exceed the per-call limit of MPI's int counts (" +
                        std::to_string(max_count_per_call()) + "); use the blocking allgather"));
  auto req = std::make_unique<MpiRequest>(err_, "iallgather");
  req->counts.assign(counts.begin(), counts.end());
  req->displs.assign(counts.size(), 0);
  for (size_t r = 1; r < counts.size(); ++r)
    req->displs[r] = req->displs[r - 1] + req->counts[r - 1];
  MPI_Request r;
  int rc = MPI_Iallgatherv(l->in_place ? MPI_IN_PLACE : send, static_cast<int>(l->count), MPI_FLOAT,
                           recv, req->counts.data(), req->displs.data(), MPI_FLOAT, comm_, &r);
  if (rc != MPI_SUCCESS)
    return Request::finished(err_.check(rc, "iallgather", "MPI_Iallgatherv", __FILE__, __LINE__));
  req->reqs.push_back(r);
  return Request(std::move(req));
}

// The bf16 pieces travel as MPI_UINT16_T: bits, never arithmetic. pieces()
// checks counts (one per rank, within int), puts them and their prefix
// offsets in the request and posts what `start` starts; the alltoall appends
// its receive side (every rank's copy of this rank's piece, in rank order).
Request MpiComm::ialltoall_pieces(const bf16* send, bf16* recv, const std::vector<size_t>& counts) {
  return pieces("ialltoall_pieces", "MPI_Ialltoallv", counts, [&](MpiRequest& q, MPI_Request* r) {
    const int W = size(), mine = q.counts[size_t(rank())];
    for (int p = 0; p < W; ++p) q.counts.push_back(mine), q.displs.push_back(p * mine);
    return MPI_Ialltoallv(send, q.counts.data(), q.displs.data(), MPI_UINT16_T, recv, q.counts.data() + W,
                          q.displs.data() + W, MPI_UINT16_T, comm_, r);
  });
}

Request MpiComm::iallgather_pieces(bf16* recv, const std::vector<size_t>& counts) {
  return pieces("iallgather_pieces", "MPI_Iallgatherv", counts, [&](MpiRequest& q, MPI_Request* r) {
    return MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, q.counts.data(), q.displs.data(),
                           MPI_UINT16_T, comm_, r);
  });
}

Request MpiComm::pieces(const char* op, const char* call, const std::vector<size_t>& counts,
                        const std::function<int(MpiRequest&, MPI_Request*)>& start) {
  if (counts.size() != size_t(size()))
    return Request::finished(Status::invalid(std::string("[dist] ") + op + ": " + std::to_string(counts.size()) +
                                             " counts for a world of " + std::to_string(size()) + " ranks"));
  auto req = std::make_unique<MpiRequest>(err_, op);
  size_t at = 0;
  for (size_t c : counts) req->counts.push_back(int(c)), req->displs.push_back(int(at)), at += c;
  if (at > max_count_per_call() || counts[size_t(rank())] * counts.size() > max_count_per_call())
    return Request::finished(Status::invalid(std::string("[dist] ") + op + ": more elements than MPI's int counts hold"));
  MPI_Request r;
  if (int rc = start(*req, &r); rc != MPI_SUCCESS) return Request::finished(err_.check(rc, op, call, __FILE__, __LINE__));
  req->reqs.push_back(r);
  return Request(std::move(req));
}

Status MpiComm::broadcast(void* data, size_t bytes, int root) {
  trace::Scope scope("broadcast", "comm");
  CRUCIBLE_RETURN_IF_ERROR(detail::check_peer("broadcast", "root", root, size()));
  CRUCIBLE_RETURN_IF_ERROR(detail::check_buffer("broadcast", data, bytes));
  const size_t max = max_count_per_call();
  for (size_t i = 0; i < bytes; i += max) {
    int c = static_cast<int>(std::min(max, bytes - i));
    CRUCIBLE_MPI("broadcast", MPI_Bcast, static_cast<char*>(data) + i, c, MPI_BYTE, root, comm_);
  }
  return Status::ok();
}

Status MpiComm::allgather_bytes(const void* send, size_t bytes, void* recv) {
  trace::Scope scope("allgather_bytes", "comm");
  CRUCIBLE_RETURN_IF_ERROR(detail::check_buffer("allgather_bytes", send, bytes));
  CRUCIBLE_RETURN_IF_ERROR(detail::check_buffer("allgather_bytes", recv, bytes));
  if (bytes == 0) return Status::ok();
  if (bytes > max_count_per_call() / size())
    return Status::invalid("[dist] allgather_bytes: " + std::to_string(bytes) +
                           " bytes per rank is more than this call is for (at most " +
                           std::to_string(max_count_per_call() / size()) + ")");
  char* mine = static_cast<char*>(recv) + static_cast<size_t>(rank()) * bytes;
  CRUCIBLE_MPI("allgather_bytes", MPI_Allgather, send == mine ? MPI_IN_PLACE : send,
               static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE, comm_);
  return Status::ok();
}

Status MpiComm::check_tag(const char* op, int tag) const {
  if (tag < 0)
    return Status::invalid(std::string("[dist] ") + op + ": negative tag " + std::to_string(tag));
  return Status::ok();
}

std::vector<int> MpiComm::message_chunks(size_t bytes) const {
  const size_t max = max_count_per_call();
  std::vector<int> chunks;
  for (size_t i = 0; i < bytes; i += max)
    chunks.push_back(static_cast<int>(std::min(max, bytes - i)));
  if (chunks.empty()) chunks.push_back(0);
  return chunks;
}

Status MpiComm::check_received(const char* op, const MPI_Status& st, int expected) const {
  int got = 0;
  CRUCIBLE_MPI(op, MPI_Get_count, &st, MPI_BYTE, &got);
  if (got != expected)
    return Status::invalid(std::string("[dist] ") + op + ": rank " + std::to_string(rank()) +
                           " expected " + std::to_string(expected) + " bytes from rank " +
                           std::to_string(st.MPI_SOURCE) + ", got " + std::to_string(got) +
                           " (sender and receiver disagree on the message size)");
  return Status::ok();
}

Request MpiComm::isend(const void* data, size_t bytes, int dest, int tag) {
  Status bad = detail::check_peer("isend", "dest", dest, size());
  if (bad) bad = detail::check_buffer("isend", data, bytes);
  if (bad) bad = check_tag("isend", tag);
  if (!bad) return Request::finished(bad);
  auto req = std::make_unique<MpiRequest>(err_, "isend");
  const char* p = static_cast<const char*>(data);
  for (int c : message_chunks(bytes)) {
    MPI_Request r;
    int rc = MPI_Isend(p, c, MPI_BYTE, dest, tag, comm_, &r);
    if (rc != MPI_SUCCESS) {
      Status posted = err_.check(rc, "isend", "MPI_Isend", __FILE__, __LINE__);
      Request earlier(std::move(req));  // the chunks already posted finish first
      (void)earlier.wait();
      return Request::finished(posted);
    }
    req->reqs.push_back(r);
    p += c;
  }
  return Request(std::move(req));
}

Request MpiComm::irecv(void* data, size_t bytes, int src, int tag) {
  Status bad = detail::check_peer("irecv", "src", src, size());
  if (bad) bad = detail::check_buffer("irecv", data, bytes);
  if (bad) bad = check_tag("irecv", tag);
  if (!bad) return Request::finished(bad);
  auto req = std::make_unique<MpiRequest>(err_, "irecv");
  std::vector<int> chunks = message_chunks(bytes);
  char* p = static_cast<char*>(data);
  for (int c : chunks) {
    MPI_Request r;
    int rc = MPI_Irecv(p, c, MPI_BYTE, src, tag, comm_, &r);
    if (rc != MPI_SUCCESS) {
      Status posted = err_.check(rc, "irecv", "MPI_Irecv", __FILE__, __LINE__);
      Request earlier(std::move(req));
      (void)earlier.wait();
      return Request::finished(posted);
    }
    req->reqs.push_back(r);
    p += c;
  }
  // Each chunk must be as large as was sent (sender and receiver agree).
  req->check_statuses = [this, chunks](const std::vector<MPI_Status>& st) -> Status {
    for (size_t i = 0; i < st.size() && i < chunks.size(); ++i)
      CRUCIBLE_RETURN_IF_ERROR(check_received("irecv", st[i], chunks[i]));
    return Status::ok();
  };
  return Request(std::move(req));
}

Result<std::unique_ptr<Comm>> MpiComm::split(int color, int key) {
  if (color < 0) return Status::invalid("[dist] split: color " + std::to_string(color) + " must be >= 0");
  MPI_Comm sub = MPI_COMM_NULL;
  CRUCIBLE_MPI("split", MPI_Comm_split, comm_, color, key, &sub);
  CRUCIBLE_MPI("split", MPI_Comm_set_errhandler, sub, MPI_ERRORS_RETURN);
  int r = 0, n = 0;
  CRUCIBLE_MPI("split", MPI_Comm_rank, sub, &r);
  CRUCIBLE_MPI("split", MPI_Comm_size, sub, &n);
  return std::unique_ptr<Comm>(new MpiComm(sub, /*owns_mpi=*/false, r, n));
}

Status MpiComm::sendrecv(const void* send, size_t send_bytes, int dest, void* recv,
                         size_t recv_bytes, int src, int tag) {
  trace::Scope scope("sendrecv", "comm");
  CRUCIBLE_RETURN_IF_ERROR(detail::check_peer("sendrecv", "dest", dest, size()));
  CRUCIBLE_RETURN_IF_ERROR(detail::check_peer("sendrecv", "src", src, size()));
  CRUCIBLE_RETURN_IF_ERROR(detail::check_buffer("sendrecv", send, send_bytes));
  CRUCIBLE_RETURN_IF_ERROR(detail::check_buffer("sendrecv", recv, recv_bytes));
  CRUCIBLE_RETURN_IF_ERROR(check_tag("sendrecv", tag));
  // Receives posted first, then sends, then one wait: no ordering between
  // ranks can deadlock, and chunks of one direction arrive in order.
  std::vector<int> rchunks = message_chunks(recv_bytes), schunks = message_chunks(send_bytes);
  std::vector<MPI_Request> reqs;
  reqs.reserve(rchunks.size() + schunks.size());
  Status posted;
  char* rp = static_cast<char*>(recv);
  for (int c : rchunks) {
    MPI_Request r;
    int rc = MPI_Irecv(rp, c, MPI_BYTE, src, tag, comm_, &r);
    if (rc != MPI_SUCCESS) {
      posted = err_.check(rc, "sendrecv", "MPI_Irecv", __FILE__, __LINE__);
      break;
    }
    reqs.push_back(r);
    rp += c;
  }
  const char* sp = static_cast<const char*>(send);
  for (size_t i = 0; posted.is_ok() && i < schunks.size(); ++i) {
    MPI_Request r;
    int rc = MPI_Isend(sp, schunks[i], MPI_BYTE, dest, tag, comm_, &r);
    if (rc != MPI_SUCCESS) {
      posted = err_.check(rc, "sendrecv", "MPI_Isend", __FILE__, __LINE__);
      break;
    }
    reqs.push_back(r);
    sp += schunks[i];
  }
  if (!posted.is_ok()) {
    for (MPI_Request& r : reqs) {
      MPI_Cancel(&r);
      MPI_Request_free(&r);
    }
    return posted;
  }
  std::vector<MPI_Status> st(reqs.size());
  CRUCIBLE_RETURN_IF_ERROR(
      err_.check(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), st.data()), "sendrecv",
                 "MPI_Waitall", __FILE__, __LINE__, &st));
  for (size_t i = 0; i < rchunks.size(); ++i)
    CRUCIBLE_RETURN_IF_ERROR(check_received("sendrecv", st[i], rchunks[i]));
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Comm>> detail::make_mpi_world() { return MpiComm::create(); }

}  // namespace crucible::comm
