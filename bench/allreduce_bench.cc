// allreduce_bench: bus bandwidth of Comm::allreduce (f32 sum) next to plain
// MPI_Allreduce on the same buffer (the peer) and one rank's memcpy of the same
// size (the shared-memory ceiling), all measured in this run.
//
//   mpirun -n 2 --bind-to none --mca btl self,vader build/allreduce_bench [MiB ...]
//   CRUCIBLE_MPI_MALLOPT=0 mpirun ...   # without crucible's malloc tuning
//
// "flt/op" is minor page faults per call: Open MPI's per-call temporaries
// above glibc's mmap threshold are fresh pages every call.
// busbw = bytes / time * 2(n-1)/n (the traffic per rank of a ring allreduce,
// as nccl-tests report it). Like the rest of dist, MPI is initialised by
// dist::world(); this program includes <mpi.h> only to time the raw peer call.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/clock.h"
#include "dist/comm.h"

namespace {

using crucible::Stopwatch;
using crucible::dist::Comm;

long minor_faults() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

struct Timing {
  double seconds;  // per call: the slowest rank's mean over a timed loop, best of 3 loops
  double faults;   // minor page faults per call, the most of any rank
};

// Best of three timed loops: the machine is shared, and the fastest loop is the
// one least disturbed by others.
template <typename F>
Timing time_calls(Comm* comm, int iters, F&& call) {
  call();  // warm-up: first-touch of buffers, MPI connections
  call();
  Timing best{1e30, 0};
  for (int rep = 0; rep < 3; ++rep) {
    (void)comm->barrier();
    long f0 = minor_faults();
    Stopwatch sw;
    for (int i = 0; i < iters; ++i) call();
    double r[2] = {sw.elapsed_s() / iters, double(minor_faults() - f0) / iters};
    (void)comm->allreduce(r, 2, crucible::dist::ReduceOp::kMax);
    best.seconds = std::min(best.seconds, r[0]);
    best.faults = std::max(best.faults, r[1]);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  auto w = crucible::dist::world();
  if (!w) {
    std::fprintf(stderr, "%s\n", w.status().message().c_str());
    return 2;
  }
  Comm* comm = *w;
  std::vector<double> mib;
  for (int i = 1; i < argc; ++i) mib.push_back(std::atof(argv[i]));
  if (mib.empty()) mib = {8, 25, 128};
  const int n = comm->size();
  const char* env = std::getenv("CRUCIBLE_MPI_MALLOPT");
  const bool tuned = !(env && std::strcmp(env, "0") == 0);
  if (comm->rank() == 0)
    std::printf("allreduce f32 sum, %d ranks (%s), malloc tuning %s\n", n, comm->backend().c_str(),
                tuned ? "on" : "off (CRUCIBLE_MPI_MALLOPT=0)");
  if (comm->rank() == 0)
    std::printf("%7s %9s %11s %11s %12s %9s %9s %12s %11s\n", "MiB", "Comm ms", "Comm busbw",
                "MPI busbw", "memcpy GB/s", "Comm/MPI", "Comm/cpy", "Comm flt/op", "MPI flt/op");
  for (double m : mib) {
    const size_t count = static_cast<size_t>(m * (1 << 20)) / sizeof(float);
    const double bytes = count * sizeof(float);
    std::vector<float> buf(count, 1e-3f), dst(count);
    const int iters = std::clamp(static_cast<int>(1e9 / std::max(bytes, 1.0)), 3, 100);
    Timing t_comm = time_calls(comm, iters, [&] { (void)comm->allreduce(buf.data(), count); });
    Timing t_mpi = time_calls(comm, iters, [&] {
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    });
    Timing t_cpy = time_calls(comm, iters, [&] {
      std::memcpy(dst.data(), buf.data(), count * sizeof(float));
      asm volatile("" : : "r"(dst.data()) : "memory");
    });
    const double factor = 2.0 * (n - 1) / n;
    const double bus_comm = bytes / t_comm.seconds * factor * 1e-9;
    const double bus_mpi = bytes / t_mpi.seconds * factor * 1e-9;
    const double cpy = bytes / t_cpy.seconds * 1e-9;
    if (comm->rank() == 0)
      std::printf("%7.1f %9.2f %11.2f %11.2f %12.2f %9.2f %9.2f %12.0f %11.0f\n", m,
                  t_comm.seconds * 1e3, bus_comm, bus_mpi, cpy, bus_comm / bus_mpi, bus_comm / cpy,
                  t_comm.faults, t_mpi.faults);
  }
  return 0;
}
