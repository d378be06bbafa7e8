// comm::Comm: the collectives and point-to-point calls that data, tensor and
// pipeline parallelism are built on, over the world of processes of one job.
//
// Two implementations: MPI (Open MPI; comm_mpi.cc is the only file of crucible
// that includes <mpi.h>), used when the process was started by mpirun/mpiexec
// or srun, and a single-process one (world size 1, no MPI launch needed), where
// reductions are no-ops and scatters/gathers are copies.
//
// Contract: every call is collective over the world (all ranks call it, in the
// same order, with matching arguments: same n, same counts, same root) unless
// it says otherwise. Argument errors that a rank can see alone (counts.size()
// != size(), a root out of range, a null buffer) return Status::invalid without
// communicating; since every rank sees them alike, no rank is left waiting.
// Errors from MPI come back as Status (MPI_ERRORS_RETURN), naming the MPI call,
// file:line and MPI's error string. A rank that cannot continue while the others
// may be waiting in a collective must call abort(), not exit.
//
// Counts are element counts of float/double or byte counts. MPI counts are
// int: blocking calls split larger buffers into several MPI calls;
// non-blocking reduce_scatter/allgather whose counts exceed max_count_per_call()
// (2^30 - 1 elements, 4 GiB of floats) return an error (use the blocking call).
//
// Memory (MPI backend): Open MPI mallocs per-call temporaries as large as the
// message (a 40 MiB allreduce at 2 ranks: 40 MiB per call), and glibc serves
// allocations above its mmap threshold (at most 32 MiB) with fresh mmaps that
// are page-faulted on every call (~14 us per 4 KiB page on these VMs). Hence:
// - right after MPI_Init, mallopt pins M_MMAP_THRESHOLD at 32 MiB (the most it
//   accepts) and M_TRIM_THRESHOLD at 256 MiB, so temporaries up to 32 MiB are
//   reused from the heap from the first call on (glibc's dynamic threshold gets
//   there only after a first call of each size). CRUCIBLE_MPI_MALLOPT=0 in the
//   environment skips it (for measuring only);
// - allreduce/iallreduce go in equal segments of at most 24 MiB, so their
//   temporaries stay under the threshold for any buffer size (measured at 128
//   MiB, 2 ranks: no page faults instead of 16386 per call, 1.7-2x busbw).
// reduce_scatter/allgather are not segmented: keep their buffers (data-parallel
// buckets, 25 MB by default) under 32 MiB. docs/architecture.md, "dist: Open
// MPI and malloc".
//
// Thread-safety: thread-compatible. One thread per process calls the Comm and
// its Requests (MPI is initialised with MPI_THREAD_FUNNELED); other threads
// (OpenMP workers) may compute meanwhile. The Comm must outlive its Requests.
#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace crucible::comm {

enum class ReduceOp { kSum, kMax, kMin };

// A pending non-blocking operation. Its buffers must stay alive and untouched
// until it has finished. wait() blocks until done and returns the outcome
// (idempotent: later calls return the same Status); test() polls and drives
// MPI's progress engine (call it between backward layers so a non-blocking
// allreduce advances); it returns true once finished, successfully or not.
// Destroying an unfinished Request waits for it (an error is then printed to
// stderr, as there is nobody to return it to). Move-only.
class Request {
 public:
  // The backend's side of a request.
  class Impl {
   public:
    virtual ~Impl() = default;
    // True when finished; *status is then the outcome.
    virtual bool test(Status* status) = 0;
    // Blocks until finished; returns the outcome.
    virtual Status wait() = 0;
  };

  Request();  // a finished, successful request (what the single backend returns)
  explicit Request(std::unique_ptr<Impl> impl);
  static Request finished(Status status);  // e.g. an argument error
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;  // waits for the request it replaces
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  Status wait();
  bool test();
  bool done() const { return impl_ == nullptr; }

 private:
  std::unique_ptr<Impl> impl_;  // null once finished
  Status status_;
};

// One per process (see world()); thread-compatible.
class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "single" | "mpi"

  // ---- float buffers (gradients, parameters) ----
  // data[0..n) := op over ranks of data[0..n), in place.
  virtual Status allreduce(float* data, size_t n, ReduceOp op = ReduceOp::kSum) = 0;
  virtual Request iallreduce(float* data, size_t n, ReduceOp op = ReduceOp::kSum) = 0;
  // send: sum(counts) floats, rank 0's piece first; recv[0..counts[rank]) := the
  // sum over ranks of this rank's piece. Uneven counts are allowed, zero too.
  // In place: recv == send + (offset of this rank's piece); the rest of the send
  // buffer is then scratch (its contents afterwards are unspecified). Any other
  // overlap of send and recv is an error. MPI wants an in-place call in place on
  // every rank: pass the aliasing pointer on ranks whose count is 0 too.
  virtual Status reduce_scatter(const float* send, float* recv,
                                const std::vector<size_t>& counts) = 0;
  virtual Request ireduce_scatter(const float* send, float* recv,
                                  const std::vector<size_t>& counts) = 0;
  // Each rank contributes counts[rank] floats from send; recv (sum(counts)
  // floats) receives every piece in rank order. In place: send == recv +
  // (offset of this rank's piece), on every rank (as for reduce_scatter).
  virtual Status allgather(const float* send, float* recv, const std::vector<size_t>& counts) = 0;
  virtual Request iallgather(const float* send, float* recv, const std::vector<size_t>& counts) = 0;

  // ---- bf16 pieces (gradients on the wire: dist.grad_dtype = "bf16") ----
  // MPI has no bf16 type and no bf16 sum, so these move bits only (as 16-bit
  // integers) and the caller sums in f32 (parallel/data_parallel.cc).
  // send: sum(counts) elements, rank q's piece at its prefix offset; rank q
  // receives piece q of every rank: recv (size() * counts[rank()]) := those
  // pieces in rank order (MPI_Ialltoallv).
  virtual Request ialltoall_pieces(const bf16* send, bf16* recv, const std::vector<size_t>& counts) = 0;
  // In place: recv (sum(counts)) holds this rank's piece at its offset; every
  // rank's piece arrives at its own (MPI_Iallgatherv).
  virtual Request iallgather_pieces(bf16* recv, const std::vector<size_t>& counts) = 0;

  // ---- small buffers (norms, timings, config agreement) ----
  virtual Status allreduce(double* data, size_t n, ReduceOp op = ReduceOp::kSum) = 0;
  // data[0..bytes) := root's data[0..bytes).
  virtual Status broadcast(void* data, size_t bytes, int root) = 0;
  // Every rank contributes `bytes` bytes; recv (size() * bytes) gets them in rank
  // order. At most max_count_per_call() bytes per rank.
  virtual Status allgather_bytes(const void* send, size_t bytes, void* recv) = 0;

  // ---- point to point (not collective) ----
  // A receive must name the exact size that was sent (a shorter or longer
  // message is an error). Messages between two ranks with one tag arrive in order.
  // send may block until the matching recv starts: pair them so no cycle waits
  // (or use sendrecv). The single backend has no one to talk to: send/recv are
  // errors, sendrecv to itself copies.
  virtual Status send(const void* data, size_t bytes, int dest, int tag) = 0;
  virtual Status recv(void* data, size_t bytes, int src, int tag) = 0;
  // The same, non-blocking (send and recv are these plus wait()): the buffer
  // stays untouched until the Request finishes. Pipeline stages post their
  // receives early and their sends as soon as an activation is ready.
  virtual Request isend(const void* data, size_t bytes, int dest, int tag) = 0;
  virtual Request irecv(void* data, size_t bytes, int src, int tag) = 0;
  virtual Status sendrecv(const void* send, size_t send_bytes, int dest, void* recv,
                          size_t recv_bytes, int src, int tag) = 0;

  // Sub-communicators, collective over this Comm: the ranks that pass the same
  // color (>= 0) form one, ranked by key (ties by rank here). Tensor, pipeline
  // and data-parallel groups are splits of the world (parallel/layout.h). The
  // result is independent of this Comm's lifetime but not of MPI's.
  virtual Result<std::unique_ptr<Comm>> split(int color, int key) = 0;

  virtual Status barrier() = 0;
  // Ends every rank of the job (MPI_Abort) with exit code `code` — for a rank
  // that cannot continue while others wait in a collective. Not collective.
  [[noreturn]] virtual void abort(int code) = 0;
};

// True when this process was started by an MPI launcher: mpirun/mpiexec
// (OMPI_COMM_WORLD_SIZE or PMIX_RANK set), srun (PMI_RANK, or SLURM_PROCID with
// more than one task in the step). Decides whether MPI is initialised at all.
bool launched_by_mpi();

// The process-wide communicator: MPI when launched_by_mpi(), otherwise
// single-process. The first call initialises MPI (MPI_Init_thread, FUNNELED;
// an MPI already initialised by the program is used as is and not finalised);
// MPI is finalised at exit. Returns the same Comm (or the same error) on every
// call; call it first from the thread that will make the MPI calls.
Result<Comm*> world();

// A single-process Comm (rank 0 of 1), for tests and world size 1.
std::unique_ptr<Comm> make_single_comm();

// Every rank's host name (core/process.h host_name(), at most 255 bytes), in
// rank order. Collective.
Result<std::vector<std::string>> host_names(Comm& comm);

// A barrier that sleeps between polls instead of spinning: for ranks that
// wait while another rank of the same machine measures or works (a spinning
// MPI wait takes a core from it). Costs up to `poll` of latency.
Status quiet_barrier(Comm& comm, std::chrono::microseconds poll = std::chrono::microseconds(500));

// The most elements (or bytes) one MPI call is given: 2^30 - 1.
size_t max_count_per_call();

namespace detail {
// Lowers the per-call limit so tests can reach the chunked paths with small
// buffers; returns the previous limit. Every rank must set the same value.
size_t set_max_count_per_call_for_testing(size_t n);

// Where a rank's piece lies in the full buffer of a reduce_scatter (full =
// send, piece = recv) or an allgather (full = recv, piece = send).
struct PieceLayout {
  size_t offset = 0;      // of this rank's piece in the full buffer, in floats
  size_t count = 0;       // counts[rank]
  size_t total = 0;       // sum(counts)
  bool in_place = false;  // piece == full + offset
};
// The argument checks both backends share ("[dist] <op>: ..." errors).
Result<PieceLayout> check_pieces(const char* op, const float* full, const float* piece,
                                 const std::vector<size_t>& counts, int rank, int size);
Status check_peer(const char* op, const char* role, int peer, int size);
Status check_buffer(const char* op, const void* data, size_t n);
// The MPI world (comm_mpi.cc); world() calls it once.
Result<std::unique_ptr<Comm>> make_mpi_world();
}  // namespace detail

}  // namespace crucible::comm
