// Plain MPI collectives on MPI_COMM_WORLD for float buffers: the peer that
// crucible's probe and benchmarks measure comm::Comm against in the same run
// ("how does Comm compare with calling MPI directly?"). No segmentation, no
// chunking, no argument translation beyond size_t -> int: each function is one
// MPI call, so its time is MPI's own.
//
// Only src/comm includes <mpi.h>; this header lets other layers reach the raw
// calls without it. MPI must have been initialised by comm::world() (each
// function calls it, so that happens on first use); when the process was not
// started by an MPI launcher (comm::launched_by_mpi() is false) every function
// returns Status::not_found without doing anything. Counts above INT_MAX
// elements are Status::invalid (the caller splits; these functions do not, on
// purpose). MPI errors come back as Status naming the MPI call.
//
// Every call is collective over MPI_COMM_WORLD (all ranks, same counts).
// Thread-safety: as comm::Comm (call from the thread that calls the Comm).
#pragma once
#include <cstddef>

#include "core/status.h"

namespace crucible::comm {

// data[0..n) := sum over ranks of data[0..n), in place (MPI_Allreduce with
// MPI_IN_PLACE, MPI_SUM).
Status mpi_peer_allreduce_sum(float* data, size_t n);

// recv[r*count .. (r+1)*count) := rank r's send[0..count) (MPI_Allgather);
// recv holds size*count floats. send and recv must not overlap.
Status mpi_peer_allgather(const float* send, size_t count, float* recv);

// recv[0..count) := sum over ranks of send[rank*count .. (rank+1)*count)
// (MPI_Reduce_scatter_block); send holds size*count floats. No overlap.
Status mpi_peer_reduce_scatter(const float* send, float* recv, size_t count);

}  // namespace crucible::comm
