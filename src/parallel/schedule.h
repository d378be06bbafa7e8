// Pipeline-parallel schedules as data: for each of the pp pipeline ranks, the
// list of compute and communication actions it executes in one step, built by
// a generator (1F1B, Megatron's interleaved 1F1B, ZB-H1) and proved sound by
// check_schedule before anything runs, so an executor only has to replay it.
//
// Stages: each rank holds v model chunks (virtual stages), S = pp * v global
// stages; chunk c on rank r is global stage c * pp + r (Megatron's interleaved
// mapping; with v = 1 the stage is the rank). Micro-batch j goes forward
// through stages 0..S-1, then backward S-1..0. Stage s sends its output
// activation to s+1 and its input gradient to s-1.
//
// Executor semantics the checker proves a schedule against: a rank runs its
// actions in order; a send never blocks (an MPI_Isend whose buffer stays alive
// until the step ends); a receive blocks until the peer has executed the
// matching send. Messages between two ranks are matched by (micro, stage,
// kind), not by order, so a schedule may receive in another order than the
// peer sent. Values; pure functions; thread-compatible.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace crucible::parallel {

enum class Op : uint8_t {
  kForward,         // forward of (micro, chunk)
  kBackward,        // whole backward (input and weight gradients) of (micro, chunk)
  kBackwardInput,   // ZB-H1: the input gradient only (what the previous stage waits for)
  kBackwardWeight,  // ZB-H1: the weight gradient of a (micro, chunk) whose kBackwardInput ran
  kSendActivation,  // the forward output of (micro, chunk) to peer
  kRecvActivation,  // the forward input of (micro, chunk) from peer
  kSendGradient,    // the input gradient of (micro, chunk) to peer
  kRecvGradient,    // the output gradient of (micro, chunk) from peer
};
// "F", "B", "Bi", "Bw", "send_act", "recv_act", "send_grad", "recv_grad".
const char* op_name(Op op);

// One step of one rank. `chunk` is always this rank's own chunk index: for
// kSendActivation / kSendGradient the chunk that produced the data, for
// kRecvActivation / kRecvGradient the chunk that will consume it. So rank r's
// send_act of chunk c (stage s = c*pp + r) is received by rank_of_stage(s+1)
// as the recv_act of chunk_of_stage(s+1), and a send_grad of stage s by
// rank_of_stage(s-1) as the recv_grad of chunk_of_stage(s-1).
struct Action {
  Op op;
  int micro = 0;  // [0, m)
  int chunk = 0;  // model chunk on this rank, [0, v)
  int peer = -1;  // pipeline rank of the other end for the four communication ops, else -1
};

struct Schedule {
  std::string kind;  // "1f1b", "interleaved", "zb-h1"
  int pp = 1, v = 1, m = 1;
  std::vector<std::vector<Action>> ranks;  // ranks[r]: pipeline rank r's actions in execution order
};

// The global stage of chunk c on pipeline rank r (c*pp + r), and its inverse.
int stage_of(int pp, int rank, int chunk);
int rank_of_stage(int pp, int stage);
int chunk_of_stage(int pp, int stage);

// Builds the schedule; an invalid Status (one line naming the constraint) when
// the shape cannot be scheduled: pp >= 1, v >= 1, m >= 1; m >= pp for 1f1b and
// zb-h1 when pp > 1; interleaved needs m % pp == 0; v > 1 only for
// "interleaved"; an unknown kind names the known ones.
//   1f1b:        PipeDream-flush: rank r runs min(pp-1-r, m) warm-up forwards,
//                then (forward, backward) pairs, then the remaining backwards.
//   interleaved: Megatron's interleaved 1F1B over m*v (micro, chunk) units;
//                with v = 1 it is exactly 1f1b (Megatron runs its
//                non-interleaved schedule then).
//   zb-h1:       Qi et al. 2023's ZB-H1: the backward split into input and
//                weight gradients, placed by a greedy list scheduler with unit
//                costs; rank r holds at most pp - r micro-batches forwarded
//                and not backward-input'ed, and at most pp not yet
//                weight-gradient'ed (1F1B's peak), deferring r weight
//                gradients into the cool-down.
// Communication is inserted next to the compute that needs or produces it.
Result<Schedule> make_schedule(const std::string& kind, int pp, int v, int m);

// Proves a schedule sound before anything runs: ok, or an invalid Status
// naming the first problem with the rank, the action index and the action,
// e.g. "[schedule] rank 1 action 7 (recv_act micro 3 chunk 0 from 0): ...".
//  * every (micro, chunk) of every rank has exactly one forward and exactly one
//    backward: one kBackward, or one kBackwardInput followed by one kBackwardWeight;
//  * data dependencies on each rank: a forward of stage s > 0 after the receive
//    of its activation (or after the forward of stage s-1 when that is on the
//    same rank, which happens only with pp == 1); a backward (or
//    backward-input) of stage s < S-1 after the receive of its gradient (or the
//    same-rank backward of s+1); a backward after its forward; kBackwardWeight
//    after its kBackwardInput; a send after the compute that produced its data;
//  * every send has exactly one matching receive at the peer and every receive
//    one send; peers are the neighbouring stages' ranks, never self;
//  * no deadlock under the executor semantics above; if some rank cannot
//    advance, every blocked rank is named with the action it waits in.
Status check_schedule(const Schedule& s);

// What theory says the pipeline bubble is, as idle time over useful time per
// rank: 1f1b (p-1)/m, interleaved (p-1)/(v*m), zb-h1 (p-1)/(3m); 0 when pp == 1.
double theoretical_bubble(const std::string& kind, int pp, int v, int m);

// Costs per compute action (per chunk); kBackward costs b_input + b_weight and
// communication costs 0.
struct Costs {
  double f = 1, b_input = 1, b_weight = 1;
};
// Replays a checked schedule with these costs under the executor semantics and
// returns, per rank, idle / busy where idle = makespan - busy (the makespan is
// the whole pipeline's). Used by the tests to hold each generator to its theory.
std::vector<double> simulate_bubble(const Schedule& s, const Costs& c);

// The compute order, one line per rank, each ending in '\n', e.g.
// "0: F0 F1 B0 F2 B1 B2\n". Communication is left out (it follows from the
// compute); with v > 1 each action names its chunk after a dot: "F3.1".
std::string describe(const Schedule& s);

}  // namespace crucible::parallel
