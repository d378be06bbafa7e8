// Heap tuning for Open MPI's collective temporaries (comm/mpi_malloc.h).
#include "comm/mpi_malloc.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)  // defined by the libc headers above
#include <malloc.h>
#endif

namespace crucible::comm {

// glibc serves allocations above M_MMAP_THRESHOLD with fresh mmaps and returns
// them on free; Open MPI allocates its collective temporaries per call, so
// every large allreduce would page-fault its temporaries anew (~14 us per 4 KiB
// page on these VMs: 0.26 GB/s instead of ~4.7 GB/s at 128 MiB). Serve up to
// 32 MiB (mallopt's maximum) from the heap and keep freed heap memory.
void tune_malloc_for_mpi(int rank) {
#if defined(__GLIBC__)
  const char* env = std::getenv("CRUCIBLE_MPI_MALLOPT");
  if (env && std::strcmp(env, "0") == 0) return;
  constexpr int kMmapThreshold = 32 << 20;
  constexpr int kTrimThreshold = 256 << 20;
  if (mallopt(M_MMAP_THRESHOLD, kMmapThreshold) != 1)
    std::fprintf(stderr,
                 "[dist] warning (rank %d): mallopt(M_MMAP_THRESHOLD, 32 MiB) failed; large "
                 "MPI collectives will page-fault their temporaries on every call\n",
                 rank);
  if (mallopt(M_TRIM_THRESHOLD, kTrimThreshold) != 1)
    std::fprintf(stderr, "[dist] warning (rank %d): mallopt(M_TRIM_THRESHOLD, 256 MiB) failed\n",
                 rank);
#else
  (void)rank;
#endif
}

}  // namespace crucible::comm
