// The generators: each builds every rank's compute order, then one function
// inserts the communication that order needs. Checking and replaying a
// schedule live in schedule_check.cc.
#include "parallel/schedule.h"

#include <algorithm>

#include "core/check.h"
#include "parallel/layout.h"  // kSchedules: the one list of schedule names

namespace crucible::parallel {

namespace {

using Order = std::vector<Action>;  // one rank's compute actions, in execution order

Status bad(const std::string& why) { return Status::invalid("[schedule] " + why); }

Action compute(Op op, int micro, int chunk) { return Action{op, micro, chunk, -1}; }

// PipeDream-flush: rank r keeps at most pp - r micro-batches in flight.
std::vector<Order> one_f_one_b(int pp, int m) {
  std::vector<Order> ranks(pp);
  for (int r = 0; r < pp; ++r) {
    const int warmup = std::min(pp - 1 - r, m);
    Order& o = ranks[r];
    for (int j = 0; j < warmup; ++j) o.push_back(compute(Op::kForward, j, 0));
    for (int i = 0; i < m - warmup; ++i) {
      o.push_back(compute(Op::kForward, warmup + i, 0));
      o.push_back(compute(Op::kBackward, i, 0));
    }
    for (int i = m - warmup; i < m; ++i) o.push_back(compute(Op::kBackward, i, 0));
  }
  return ranks;
}

// Megatron's interleaved 1F1B (forward_backward_pipelining_with_interleaving).
// A rank's m*v (micro, chunk) units run in groups of pp micro-batches: pp
// forwards of chunk 0, pp of chunk 1, ... then the next pp micro-batches;
// backwards walk the chunks from v-1 down. The warm-up of rank r,
// 2*(pp-r-1) + (v-1)*pp, is how many forwards it can run before the first
// backward's gradient has come back around the pipeline.
std::vector<Order> interleaved(int pp, int v, int m) {
  // Megatron runs the non-interleaved schedule when v = 1; its interleaved
  // warm-up would there hold pp - r - 1 more micro-batches for no gain.
  if (v == 1) return one_f_one_b(pp, m);
  const int units = m * v;
  auto unit = [&](int k, Op op) {
    const int micro = (k / (pp * v)) * pp + k % pp;
    const int chunk = (k / pp) % v;
    return compute(op, micro, op == Op::kForward ? chunk : v - 1 - chunk);
  };
  std::vector<Order> ranks(pp);
  for (int r = 0; r < pp; ++r) {
    const int warmup = std::min((pp - r - 1) * 2 + (v - 1) * pp, units);
    Order& o = ranks[r];
    for (int k = 0; k < warmup; ++k) o.push_back(unit(k, Op::kForward));
    for (int i = 0; i < units - warmup; ++i) {
      o.push_back(unit(warmup + i, Op::kForward));
      o.push_back(unit(i, Op::kBackward));
    }
    for (int i = units - warmup; i < units; ++i) o.push_back(unit(i, Op::kBackward));
  }
  return ranks;
}

// ZB-H1 by greedy list scheduling with unit costs (F = Bi = Bw = 1). At each
// time step every idle rank takes, in priority order:
//  1. the next forward, if its activation has arrived and memory allows: fewer
//     than pp - r micro-batches forwarded and not yet backward-input'ed (what
//     1F1B holds on rank r), and fewer than pp forwarded and not yet
//     weight-gradient'ed (a micro-batch keeps activations until its Bw; pp is
//     1F1B's peak, on rank 0: "every worker the same in-flight count");
//  2. else the next backward-input whose gradient has arrived;
//  3. else its oldest pending weight gradient, which nobody waits for.
// This reproduces the paper's ZB-H1 (rank r defers r weight gradients into
// the cool-down) and its bubble exactly. Two rules that look as natural do
// not: backward-input before forward leaves every Bw to the end (rank 0 then
// holds all m micro-batches), and with the pp bound added it doubles the
// bubble (pp = 4, m = 8: 0.208 against 0.125), because the forwards the
// downstream ranks wait for go behind the backward-inputs.
// All of step t's choices finish at t + 1, so deciding rank by rank in one
// pass sees only what finished before t: no dependence on the rank order.
std::vector<Order> zero_bubble_h1(int pp, int m) {
  constexpr int kNotYet = 1 << 30;
  std::vector<std::vector<int>> f_end(pp, std::vector<int>(m, kNotYet));
  std::vector<std::vector<int>> bi_end = f_end;
  std::vector<int> next_f(pp, 0), next_bi(pp, 0), next_w(pp, 0);
  std::vector<Order> ranks(pp);
  int left = 3 * m * pp;
  for (int t = 0; left > 0; ++t) {
    CRUCIBLE_CHECK(t <= 3 * m * pp + 2 * pp, "the ZB-H1 greedy made no progress");
    for (int r = 0; r < pp; ++r) {
      const int f = next_f[r], bi = next_bi[r], w = next_w[r];
      const bool f_ready =
          f < m && f - bi < pp - r && f - w < pp && (r == 0 || f_end[r - 1][f] <= t);
      const bool bi_ready = bi < f && f_end[r][bi] <= t && (r == pp - 1 || bi_end[r + 1][bi] <= t);
      if (f_ready) {
        f_end[r][f] = t + 1;
        ranks[r].push_back(compute(Op::kForward, next_f[r]++, 0));
      } else if (bi_ready) {
        bi_end[r][bi] = t + 1;
        ranks[r].push_back(compute(Op::kBackwardInput, next_bi[r]++, 0));
      } else if (w < bi) {
        ranks[r].push_back(compute(Op::kBackwardWeight, next_w[r]++, 0));
      } else {
        continue;  // idle this step
      }
      --left;
    }
  }
  return ranks;
}

// Inserts the communication a compute order needs: each receive right before
// the compute that consumes it, each send right after the compute that
// produced it. Neighbouring stages on the same rank (pp == 1) need none.
std::vector<std::vector<Action>> with_communication(int pp, int v,
                                                    const std::vector<Order>& compute_order) {
  const int stages = pp * v;
  std::vector<std::vector<Action>> ranks(pp);
  for (int r = 0; r < pp; ++r) {
    std::vector<Action>& out = ranks[r];
    for (const Action& a : compute_order[r]) {
      const int s = stage_of(pp, r, a.chunk);
      const int prev = s > 0 ? rank_of_stage(pp, s - 1) : r;
      const int next = s < stages - 1 ? rank_of_stage(pp, s + 1) : r;
      switch (a.op) {
        case Op::kForward:
          if (prev != r) out.push_back({Op::kRecvActivation, a.micro, a.chunk, prev});
          out.push_back(a);
          if (next != r) out.push_back({Op::kSendActivation, a.micro, a.chunk, next});
          break;
        case Op::kBackward:
        case Op::kBackwardInput:
          if (next != r) out.push_back({Op::kRecvGradient, a.micro, a.chunk, next});
          out.push_back(a);
          if (prev != r) out.push_back({Op::kSendGradient, a.micro, a.chunk, prev});
          break;
        default:
          out.push_back(a);  // kBackwardWeight: nobody else needs it
      }
    }
  }
  return ranks;
}

bool known_kind(const std::string& kind) {
  return std::find(std::begin(kSchedules), std::end(kSchedules), kind) != std::end(kSchedules);
}

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::kForward:
      return "F";
    case Op::kBackward:
      return "B";
    case Op::kBackwardInput:
      return "Bi";
    case Op::kBackwardWeight:
      return "Bw";
    case Op::kSendActivation:
      return "send_act";
    case Op::kRecvActivation:
      return "recv_act";
    case Op::kSendGradient:
      return "send_grad";
    case Op::kRecvGradient:
      return "recv_grad";
  }
  return "?";
}

int stage_of(int pp, int rank, int chunk) { return chunk * pp + rank; }
int rank_of_stage(int pp, int stage) { return stage % pp; }
int chunk_of_stage(int pp, int stage) { return stage / pp; }

Result<Schedule> make_schedule(const std::string& kind, int pp, int v, int m) {
  const std::string n = std::to_string(m), p = std::to_string(pp);
  if (!known_kind(kind))
    return bad("unknown schedule '" + kind + "' (known: 1f1b, interleaved, zb-h1)");
  if (pp < 1) return bad("pp = " + p + " must be >= 1");
  if (v < 1) return bad("v = " + std::to_string(v) + " must be >= 1");
  if (m < 1) return bad("m = " + n + " micro-batches must be >= 1");
  if (v > 1 && kind != "interleaved")
    return bad("v = " + std::to_string(v) + " virtual stages need the interleaved schedule, not " +
               kind);
  if (kind != "interleaved" && pp > 1 && m < pp)
    return bad(kind + ": m = " + n + " micro-batches are fewer than pp = " + p +
               " stages (the pipeline would never fill)");
  if (kind == "interleaved" && m % pp != 0)
    return bad("interleaved: m = " + n + " micro-batches are not a multiple of pp = " + p +
               " (the schedule runs in rounds of pp micro-batches)");
  std::vector<Order> order = kind == "1f1b"          ? one_f_one_b(pp, m)
                             : kind == "interleaved" ? interleaved(pp, v, m)
                                                     : zero_bubble_h1(pp, m);
  Schedule s;
  s.kind = kind;
  s.pp = pp, s.v = v, s.m = m;
  s.ranks = with_communication(pp, v, order);
  return s;
}

double theoretical_bubble(const std::string& kind, int pp, int v, int m) {
  CRUCIBLE_CHECK(known_kind(kind), "theoretical_bubble of an unknown schedule kind");
  if (pp == 1) return 0;
  const double idle = pp - 1;
  if (kind == "interleaved") return idle / (v * m);
  if (kind == "zb-h1") return idle / (3.0 * m);
  return idle / m;
}

std::string describe(const Schedule& s) {
  std::string out;
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    out += std::to_string(r) + ":";
    for (const Action& a : s.ranks[r]) {
      if (a.op > Op::kBackwardWeight) continue;  // communication follows from the compute
      out += std::string(" ") + op_name(a.op) + std::to_string(a.micro);
      if (s.v > 1) out += "." + std::to_string(a.chunk);
    }
    out += "\n";
  }
  return out;
}

}  // namespace crucible::parallel
