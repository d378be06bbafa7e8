// The plain-MPI peer: one MPI call per function, on MPI_COMM_WORLD (whose
// error handler comm::world() sets to MPI_ERRORS_RETURN).
#define OMPI_SKIP_MPICXX 1  // the deprecated C++ bindings: not used, not linked
#define MPICH_SKIP_MPICXX 1
#include "comm/mpi_peer.h"

#include <mpi.h>

#include <climits>
#include <string>

#include "comm/comm.h"

namespace crucible::comm {
namespace {

// MPI is up (comm::world() initialised it) and n elements fit one MPI call.
Status ready(const char* op, const void* a, const void* b, size_t n) {
  if (!launched_by_mpi())
    return Status::not_found(std::string("[dist] mpi_peer ") + op +
                             ": not started by an MPI launcher (mpirun/srun), so there is no MPI "
                             "to call");
  auto w = world();
  if (!w) return w.status();
  if (n > static_cast<size_t>(INT_MAX))
    return Status::invalid(std::string("[dist] mpi_peer ") + op + ": " + std::to_string(n) +
                           " floats per rank exceed one MPI call's int count");
  if (n > 0 && (a == nullptr || b == nullptr))
    return Status::invalid(std::string("[dist] mpi_peer ") + op + ": null buffer");
  return Status::ok();
}

Status check(int rc, const char* op, const char* call) {
  if (rc == MPI_SUCCESS) return Status::ok();
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  std::string what = MPI_Error_string(rc, buf, &len) == MPI_SUCCESS
                         ? std::string(buf, len)
                         : "MPI error " + std::to_string(rc);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return Status::error(Code::kUnavailable, std::string("[dist] mpi_peer ") + op + ": " + call +
                                               " failed (rank " + std::to_string(rank) +
                                               "): " + what);
}

}  // namespace

Status mpi_peer_allreduce_sum(float* data, size_t n) {
  CRUCIBLE_RETURN_IF_ERROR(ready("allreduce", data, data, n));
  return check(
      MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
      "allreduce", "MPI_Allreduce");
}

Status mpi_peer_allgather(const float* send, size_t count, float* recv) {
  CRUCIBLE_RETURN_IF_ERROR(ready("allgather", send, recv, count));
  const int c = static_cast<int>(count);
  return check(MPI_Allgather(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, MPI_COMM_WORLD), "allgather",
               "MPI_Allgather");
}

Status mpi_peer_reduce_scatter(const float* send, float* recv, size_t count) {
  CRUCIBLE_RETURN_IF_ERROR(ready("reduce_scatter", send, recv, count));
  return check(MPI_Reduce_scatter_block(send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                                        MPI_COMM_WORLD),
               "reduce_scatter", "MPI_Reduce_scatter_block");
}

}  // namespace crucible::comm
