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
//
// Then the data-parallel gradient reduction itself (parallel/data_parallel.h)
// on a flat buffer of the same size in 25 MB buckets, gradients on the wire
// as f32 (allreduce) and as bf16 (dist.grad_dtype: alltoall of bf16 pieces,
// f32 sums, all-gather of the rounded sums), side by side.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "comm/comm.h"
#include "comm/mpi_peer.h"
#include "nn/params.h"
#include "parallel/data_parallel.h"
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
  if (comm->rank() == 0)
    std::printf("\ngradient reduction (DataParallel, 25 MB buckets), %d ranks\n%7s %12s %12s %10s\n", n, "MiB",
                "f32 ms", "bf16 ms", "f32/bf16");
  for (double m : mib) {
    const size_t count = static_cast<size_t>(m * (1 << 20)) / sizeof(float);
    crucible::nn::ParamRegistry params;
    params.add("g", {int64_t(count)}, false, crucible::nn::Init::zeros);
    params.allocate();
    std::fill_n(params.grads(), params.numel(), 1e-3f);
    const int iters = std::clamp(static_cast<int>(1e9 / std::max(m * (1 << 20), 1.0)), 3, 100);
    double ms[2];
    for (int k = 0; k < 2; ++k) {
      const crucible::DType t = k == 0 ? crucible::DType::f32 : crucible::DType::bf16;
      crucible::parallel::DataParallel dp(*comm, params, {25, 0, t});
      CallTiming c = time_or_die(comm, iters, [&] {
        dp.begin_reduction();
        auto r = dp.finish_reduction();
        return r ? Status::ok() : r.status();
      });
      ms[k] = c.seconds * 1e3;
    }
    if (comm->rank() == 0) std::printf("%7.1f %12.2f %12.2f %10.2f\n", m, ms[0], ms[1], ms[0] / ms[1]);
  }
  return 0;
}
