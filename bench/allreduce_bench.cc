// allreduce_bench: bus bandwidth of Comm::allreduce (f32 sum) next to plain
// MPI_Allreduce on the same buffer (the peer, dist/mpi_peer.h) and one rank's
// memcpy of the same size (the shared-memory ceiling), all measured in this run.
//
//   mpirun -n 2 --bind-to none --mca btl self,vader build/allreduce_bench [MiB ...]
//   CRUCIBLE_MPI_MALLOPT=0 mpirun ...   # without crucible's malloc tuning
//
// "flt/op" is minor page faults per call: Open MPI's per-call temporaries
// above glibc's mmap threshold are fresh pages every call.
// busbw = bytes / time * 2(n-1)/n (the traffic per rank of a ring allreduce,
// as nccl-tests report it). Times come from profile::time_collective_calls,
// the timing `crucible probe` uses for its collectives (which also sweeps sizes
// for allgather and reduce_scatter).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "comm/comm.h"
#include "comm/mpi_peer.h"
#include "profile/probe_interconnect.h"

namespace {

using crucible::Status;
using crucible::comm::Comm;
using crucible::profile::CallTiming;

// Exits on error: a benchmark has nobody to return a Status to.
CallTiming time_or_die(Comm* comm, int iters, const std::function<Status()>& call) {
  auto t = crucible::profile::time_collective_calls(*comm, iters, call);
  if (!t) {
    std::fprintf(stderr, "%s\n", t.status().message().c_str());
    comm->abort(1);
  }
  return *t;
}

}  // namespace

int main(int argc, char** argv) {
  auto w = crucible::comm::world();
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
    CallTiming t_comm =
        time_or_die(comm, iters, [&] { return comm->allreduce(buf.data(), count); });
    CallTiming t_mpi = time_or_die(
        comm, iters, [&] { return crucible::comm::mpi_peer_allreduce_sum(buf.data(), count); });
    CallTiming t_cpy = time_or_die(comm, iters, [&] {
      std::memcpy(dst.data(), buf.data(), count * sizeof(float));
      asm volatile("" : : "r"(dst.data()) : "memory");
      return Status::ok();
    });
    const double factor = 2.0 * (n - 1) / n;
    const double bus_comm = bytes / t_comm.seconds * factor * 1e-9;
    const double bus_mpi = bytes / t_mpi.seconds * factor * 1e-9;
    const double cpy = bytes / t_cpy.seconds * 1e-9;
    if (comm->rank() == 0)
      std::printf("%7.1f %9.2f %11.2f %11.2f %12.2f %9.2f %9.2f %12.0f %11.0f\n", m,
                  t_comm.seconds * 1e3, bus_comm, bus_mpi, cpy, bus_comm / bus_mpi, bus_comm / cpy,
                  t_comm.faults_per_call, t_mpi.faults_per_call);
  }
  return 0;
}
