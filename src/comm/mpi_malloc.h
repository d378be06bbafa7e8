// glibc heap settings for an MPI process (comm_mpi.cc calls it at start-up):
// Open MPI allocates its collective temporaries per call, and above glibc's
// mmap threshold each one would be a fresh, page-faulted mapping. Off with
// CRUCIBLE_MPI_MALLOPT=0 (bench/allreduce_bench.cc measures both).
#pragma once

namespace crucible::comm {

// Serves up to 32 MiB from the heap and keeps freed heap memory (glibc only;
// a warning naming `rank` when mallopt refuses).
void tune_malloc_for_mpi(int rank);

}  // namespace crucible::comm
