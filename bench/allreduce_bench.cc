// allreduce_bench: bus bandwidth of Comm::allreduce (f32 sum) next to plain
// MPI_Allreduce on the same buffer (the peer) and one rank's memcpy of the same
// size (the shared-memory ceiling), all measured in this run.
//
//   mpirun -n 2 --bind-to none --mca btl self,vader build/allreduce_bench [MiB ...]
//   CRUCIBLE_MPI_MALLOPT=0 mpirun ...   # without crucible's malloc tuning
//
// busbw = bytes / time * 2(n-1)/n (the traffic per rank of a ring allreduce,
// as nccl-tests report it). Like the rest of dist, MPI is initialised by
// dist::world(); this program includes <mpi.h> only to time the raw peer call.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

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

// Seconds per call: the slowest rank's mean over `iters` calls after a warm-up.
template <typename F>
double time_calls(Comm* comm, int iters, F&& call) {
  call();
  call();
  (void)comm->barrier();
  Stopwatch sw;
  for (int i = 0; i < iters; ++i) call();
  double t = sw.elapsed_s() / iters;
  (void)comm->allreduce(&t, 1, crucible::dist::ReduceOp::kMax);
  return t;
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
    std::printf("%9s %11s %13s %13s %13s %8s %8s\n", "MiB", "Comm ms", "Comm busbw", "MPI busbw",
                "memcpy GB/s", "Comm/MPI", "Comm/cpy");
  for (double m : mib) {
    const size_t count = static_cast<size_t>(m * (1 << 20)) / sizeof(float);
    const double bytes = count * sizeof(float);
    std::vector<float> buf(count, 1e-3f), dst(count);
    const int iters = std::clamp(static_cast<int>(2e9 / std::max(bytes, 1.0)), 3, 200);
    double t_comm = time_calls(comm, iters, [&] { (void)comm->allreduce(buf.data(), count); });
    double t_mpi = time_calls(comm, iters, [&] {
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    });
    double t_cpy = time_calls(comm, iters, [&] {
      std::memcpy(dst.data(), buf.data(), count * sizeof(float));
      asm volatile("" : : "r"(dst.data()) : "memory");
    });
    const double factor = 2.0 * (n - 1) / n;
    const double bus_comm = bytes / t_comm * factor * 1e-9, bus_mpi = bytes / t_mpi * factor * 1e-9;
    const double cpy = bytes / t_cpy * 1e-9;
    if (comm->rank() == 0)
      std::printf("%9.1f %11.2f %13.2f %13.2f %13.2f %8.2f %8.2f\n", m, t_comm * 1e3, bus_comm,
                  bus_mpi, cpy, bus_comm / bus_mpi, bus_comm / cpy);
  }
  return 0;
}
