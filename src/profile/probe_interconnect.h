// Interconnect probe, run by every rank of `crucible launch -n N -- probe`:
// ping-pong latency and bandwidth between every pair of ranks, and the bus
// bandwidth of the three collectives training uses (allreduce, allgather,
// reduce_scatter) through comm::Comm and, as the peer measured in the same
// run, through plain MPI (comm/mpi_peer.h).
//
// Conventions (nccl-tests'):
//   bytes   the total per-rank buffer: allreduce the array; allgather the full
//           gathered output; reduce_scatter the full input. Per-rank pieces are
//           whole floats, so allgather/reduce_scatter bytes are multiples of
//           4 x ranks (8 B at 4 ranks is measured as 16 B: one float each).
//   algbw   bytes / time
//   busbw   algbw x 2(n-1)/n for allreduce, algbw x (n-1)/n for allgather and
//           reduce_scatter: the traffic per rank of the ring algorithm,
//           comparable with the link's bandwidth whatever n is.
//   time    the slowest rank's mean over a loop of calls, best of 3 loops (the
//           machine is shared; the fastest loop is the least disturbed).
//           Untimed calls first warm up (first touch, MPI connections) and
//           size the loop (3 calls, or 1 when it alone fills a loop): as many
//           calls as fill ~10 ms (quick) or ~50 ms, at most 50 (quick) or
//           200, at least 1, so big sizes stay short.
// Sizes: 8 B, then x4 (quick: x8) while <= max_bytes, then max_bytes itself.
// Buffers are allocated once at max_bytes and pre-faulted before any timing.
//
// Validation, after each timed loop, as nccl-tests do it: the output is
// poisoned, the inputs are refilled with rank-dependent small integers
// (value(r, i) = (31 i + 17 r) mod 64; sums of them are exact in float), one
// more call is made and every element of its output is checked on every rank:
// allreduce -> the sum over ranks, allgather -> each rank's block,
// reduce_scatter -> the sum of this rank's piece. (Allreduce is in place, so
// its timed loops run on zeros: repeated sums of anything else grow n-fold a
// call.) Ping-pong: every timed message carries a per-round-trip stamp checked
// on both sides; after the timed round trips one more round trip on poisoned
// buffers is checked byte for byte on both sides. Failures are exchanged, so
// every rank reports every rank's failure; they are reported, not hidden.
//
// probe_interconnect() returns probe.json's "interconnect" object:
//   ranks              world size
//   hosts              host name of each rank, in rank order
//   quick              the mode it ran in
//   max_bytes          largest collective size
//   pingpong           one object per pair a < b, in order (0,1), (0,2), ...,
//                      measured one pair at a time while the others wait:
//     a, b             the ranks
//     latency_us       8-byte message: median over round trips of half the
//                      round-trip time (1000 round trips, quick 200)
//     message_bytes    the bandwidth message: min(max_bytes, 64 MiB)
//     bandwidth_gbs    message_bytes / half the fastest round trip of 5 (quick 3)
//     valid            true, or what was wrong with a payload
//   collectives        {"allreduce" | "allgather" | "reduce_scatter": {
//     busbw_factor     2(n-1)/n or (n-1)/n, as above
//     comm, mpi        comm::Comm, plain MPI: one object per size, ascending:
//       bytes          as above
//       time_us        as above
//       iters          calls per timed loop
//       algbw_gbs      bytes / time, GB/s (1e9 B/s)
//       busbw_gbs      algbw_gbs x busbw_factor
//       faults_per_call  minor page faults per call, the most of any rank
//                      (Open MPI's per-call temporaries above glibc's mmap
//                      threshold are fresh pages every call; see comm.h)
//       valid          true, or which rank saw which element wrong
//   }}
//   valid              true when every measurement validated, else a string:
//                      how many failed and the first failure
// With one rank (no MPI launch) it returns only
//   {"ranks": 1, "skipped": "one rank: run under crucible launch -n N -- probe"}.
//
// Collective: every rank calls it with the same options; every rank returns
// the same complete object. Errors (MPI failures, bad options) come back as
// Status; a failed validation does not. Uses no OpenMP threads. Thread-safety:
// as comm::Comm (one thread per process).
#pragma once
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "comm/comm.h"

namespace crucible::profile {

struct InterconnectOptions {
  bool quick = false;
  // Largest collective size; 0: 256 MiB, quick 16 MiB; at least 8.
  // (Allgather/reduce_scatter still take one float per rank when it is smaller.)
  size_t max_bytes = 0;
  // Test hook: called on every rank just before a validation check, with the
  // buffer about to be checked ("allreduce comm", "allgather mpi", ...,
  // "pingpong 0-1"); a test corrupts it there to see the check catch it.
  std::function<void(const std::string& what, void* data, size_t bytes)> tamper_for_testing =
      nullptr;
};

// Collective; see above.
Result<nlohmann::json> probe_interconnect(comm::Comm& comm, const InterconnectOptions& options);

// A few aligned lines for the terminal: ranks and hosts, ping-pong latency and
// bandwidth (per pair, or min/median/max over many), and per collective the
// small-message time and the largest size's busbw, Comm next to MPI.
std::string interconnect_table(const nlohmann::json& interconnect);

// Per-call time of a collective operation (also used by bench/allreduce_bench):
// `warmup` untimed calls, then 3 loops of `iters` calls, each loop started
// after a barrier; a loop's time per call is the slowest rank's mean; the
// fastest loop is kept. Collective; the first failing call's Status is returned
// (call() must fail on every rank alike, e.g. argument errors, or not at all).
struct CallTiming {
  double seconds = 0;          // per call
  double faults_per_call = 0;  // minor page faults per call, the most of any rank
};
Result<CallTiming> time_collective_calls(comm::Comm& comm, int iters,
                                         const std::function<Status()>& call, int warmup = 2);

namespace detail {
// Nominal sizes: 8, 8f, 8f^2, ... <= max_bytes, then max_bytes if not reached.
std::vector<size_t> collective_sizes(size_t max_bytes, size_t factor);
// 2(n-1)/n for "allreduce", (n-1)/n for "allgather" and "reduce_scatter", else 0.
double busbw_factor(const std::string& op, int ranks);
}  // namespace detail

}  // namespace crucible::profile
