// Pipeline schedules: every generator's output passes the checker on every
// shape up to pp = 8, meets its bubble theory in the replay and its activation
// memory bound, and each kind of broken schedule is refused with a message
// that names the rank, the action and the problem.
#include "parallel/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>

namespace crucible::parallel {
namespace {

// The micro-batch counts tried for a pipeline of pp ranks.
std::set<int> micro_counts(int pp) { return {pp, 2 * pp, pp + 1, 4 * pp, 16}; }

bool allowed(const std::string& kind, int pp, int v, int m) {
  if (v > 1 && kind != "interleaved") return false;
  if (kind == "interleaved") return m % pp == 0;
  return pp == 1 || m >= pp;
}

Schedule make(const std::string& kind, int pp, int v, int m) {
  Result<Schedule> s = make_schedule(kind, pp, v, m);
  EXPECT_TRUE(s) << s.status().message();
  return s ? *s : Schedule{};
}

// Peak counts of micro-batches (per chunk) whose forward ran and whose
// backward-input (resp. weight gradient) has not: what a rank holds in memory.
struct InFlight {
  int until_input = 0, until_weight = 0;
};
InFlight peak_in_flight(const std::vector<Action>& ops) {
  InFlight peak;
  int to_input = 0, to_weight = 0;
  for (const Action& a : ops) {
    if (a.op == Op::kForward) ++to_input, ++to_weight;
    if (a.op == Op::kBackward || a.op == Op::kBackwardInput) --to_input;
    if (a.op == Op::kBackward || a.op == Op::kBackwardWeight) --to_weight;
    peak.until_input = std::max(peak.until_input, to_input);
    peak.until_weight = std::max(peak.until_weight, to_weight);
  }
  return peak;
}

size_t index_of(const std::vector<Action>& ops, Op op, int micro, int chunk = 0) {
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].op == op && ops[i].micro == micro && ops[i].chunk == chunk) return i;
  ADD_FAILURE() << op_name(op) << micro << "." << chunk << " not in the schedule";
  return 0;
}

// check_schedule's message for a 1f1b schedule after `mutate`.
std::string broken(int pp, int m, const std::function<void(Schedule&)>& mutate) {
  Schedule s = make("1f1b", pp, 1, m);
  EXPECT_TRUE(check_schedule(s)) << "the schedule must be sound before the mutation";
  mutate(s);
  const Status st = check_schedule(s);
  EXPECT_FALSE(st);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  return st.message();
}

TEST(Schedule, EveryShapeUpToEightRanksBuildsAndChecks) {
  int checked = 0;
  for (const char* kind : {"1f1b", "interleaved", "zb-h1"})
    for (int pp = 1; pp <= 8; ++pp)
      for (int v = 1; v <= 4; ++v)
        for (int m : micro_counts(pp)) {
          Result<Schedule> s = make_schedule(kind, pp, v, m);
          ASSERT_EQ(bool(s), allowed(kind, pp, v, m))
              << kind << " pp=" << pp << " v=" << v << " m=" << m;
          if (!s) continue;
          EXPECT_TRUE(check_schedule(*s)) << check_schedule(*s).message() << "\n" << describe(*s);
          ASSERT_EQ(int(s->ranks.size()), pp);
          ++checked;
        }
  // 1f1b and zb-h1: 4 (pp = 1: m in {1, 2, 4, 16}) + 5 + 5 + 4 + 5 + 5 + 5 + 4
  // (pp = 4 and 8: 4pp or 2pp is 16) = 37 each; interleaved: m % pp == 0 keeps
  // 4 counts for pp = 1 and 2, 3 for pp = 3..8, so 26, for each of 4 v's.
  EXPECT_EQ(checked, 37 + 37 + 4 * 26);
}

TEST(Schedule, WithOneRankThereIsNoCommunication) {
  for (int v = 1; v <= 3; ++v) {
    const Schedule s = make("interleaved", 1, v, 4);
    for (const Action& a : s.ranks[0]) EXPECT_LE(a.op, Op::kBackwardWeight) << op_name(a.op);
    EXPECT_EQ(s.ranks[0].size(), size_t(2 * 4 * v));
    EXPECT_EQ(simulate_bubble(s, Costs{})[0], 0.0);
  }
}

TEST(Schedule, OneFOneBBubbleIsTheTheoryExactly) {
  // PipeDream-flush idles (p-1)(f+b) per rank: whatever the costs, the ratio is (p-1)/m.
  for (const Costs& c : {Costs{1, 1, 1}, Costs{2, 1, 1}, Costs{1, 1.5, 0.5}})
    for (int pp = 1; pp <= 8; ++pp)
      for (int m : micro_counts(pp)) {
        const std::vector<double> bubble = simulate_bubble(make("1f1b", pp, 1, m), c);
        EXPECT_NEAR(bubble[0], theoretical_bubble("1f1b", pp, 1, m), 1e-9)
            << "pp=" << pp << " m=" << m;
        for (double b : bubble) EXPECT_NEAR(b, bubble[0], 1e-9) << "every rank idles as long";
      }
  EXPECT_NEAR(simulate_bubble(make("1f1b", 4, 1, 8), Costs{})[0], 3.0 / 8, 1e-12);
}

TEST(Schedule, InterleavedBubbleIsTheTheoryExactly) {
  // Exact, not approximate: replayed, every rank is busy v*m*(f + b) and idle
  // (p-1)(f + b) in per-chunk costs (the fill and drain of a pipeline of
  // chunk-sized stages; Megatron's warm-up is long enough that no further
  // wait appears), so the ratio is (p-1)/(v*m) with no remainder.
  for (const Costs& c : {Costs{1, 1, 1}, Costs{2, 1, 1}})
    for (int pp = 2; pp <= 8; ++pp)
      for (int v = 1; v <= 4; ++v)
        for (int m : micro_counts(pp)) {
          if (m % pp != 0) continue;
          const std::vector<double> bubble = simulate_bubble(make("interleaved", pp, v, m), c);
          for (double b : bubble)
            EXPECT_NEAR(b, (pp - 1.0) / (v * m), 1e-9) << "pp=" << pp << " v=" << v << " m=" << m;
        }
  EXPECT_NEAR(simulate_bubble(make("interleaved", 4, 2, 8), Costs{})[0], 3.0 / 16, 1e-12);
}

TEST(Schedule, ZeroBubbleH1BubbleIsAThirdOfOneFOneB) {
  // Measured with unit costs: exactly (p-1)/(3m) on every rank for every shape
  // here (pp = 4, m = 8: 0.125, against 1f1b's 0.375), so the test holds the
  // greedy to the theory itself rather than to a tolerance.
  for (int pp = 2; pp <= 8; ++pp)
    for (int m : micro_counts(pp)) {
      if (m < pp) continue;
      const std::vector<double> bubble = simulate_bubble(make("zb-h1", pp, 1, m), Costs{});
      for (double b : bubble)
        EXPECT_NEAR(b, theoretical_bubble("zb-h1", pp, 1, m), 1e-9) << "pp=" << pp << " m=" << m;
      EXPECT_NEAR(3 * bubble[0], simulate_bubble(make("1f1b", pp, 1, m), Costs{})[0], 1e-9);
    }
}

TEST(Schedule, InterleavedWithOneChunkIsOneFOneB) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int m : {pp, 2 * pp, 4 * pp}) {
      const Schedule a = make("interleaved", pp, 1, m), b = make("1f1b", pp, 1, m);
      EXPECT_EQ(describe(a), describe(b));
      ASSERT_EQ(a.ranks.size(), b.ranks.size());
      for (size_t r = 0; r < a.ranks.size(); ++r) {
        ASSERT_EQ(a.ranks[r].size(), b.ranks[r].size());
        for (size_t i = 0; i < a.ranks[r].size(); ++i) {
          EXPECT_EQ(a.ranks[r][i].op, b.ranks[r][i].op);
          EXPECT_EQ(a.ranks[r][i].micro, b.ranks[r][i].micro);
          EXPECT_EQ(a.ranks[r][i].peer, b.ranks[r][i].peer);
        }
      }
    }
}

TEST(Schedule, InFlightMicroBatchesStayWithinOneFOneBMemory) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int m : micro_counts(pp)) {
      if (m < pp) continue;
      const Schedule one = make("1f1b", pp, 1, m), zb = make("zb-h1", pp, 1, m);
      for (int r = 0; r < pp; ++r) {
        EXPECT_EQ(peak_in_flight(one.ranks[r]).until_input, pp - r);
        // ZB-H1: as 1F1B until the backward-input; until the weight gradient at
        // most pp, 1F1B's peak over all ranks (rank 0's).
        EXPECT_LE(peak_in_flight(zb.ranks[r]).until_input, pp - r) << "pp=" << pp << " m=" << m;
        EXPECT_LE(peak_in_flight(zb.ranks[r]).until_weight, pp) << "pp=" << pp << " m=" << m;
      }
      if (m % pp != 0) continue;
      for (int v = 2; v <= 4; ++v) {
        const Schedule il = make("interleaved", pp, v, m);
        for (int r = 0; r < pp; ++r) {
          // Megatron's warm-up forwards plus the steady state's one more.
          const int warmup = std::min(2 * (pp - r - 1) + (v - 1) * pp, m * v);
          EXPECT_EQ(peak_in_flight(il.ranks[r]).until_input, std::min(warmup + 1, m * v))
              << "pp=" << pp << " v=" << v << " m=" << m << " rank " << r;
        }
      }
    }
}

TEST(Schedule, ZeroBubbleH1FillsTheCoolDownWithWeightGradients) {
  // Rank r defers r weight gradients: after its last backward-input it has
  // r + 1 left, the later ranks' idle tail in 1F1B.
  const Schedule s = make("zb-h1", 4, 1, 8);
  for (int r = 0; r < 4; ++r) {
    const std::vector<Action>& ops = s.ranks[r];
    const size_t last_bi = index_of(ops, Op::kBackwardInput, 7);
    const long tail = std::count_if(ops.begin() + last_bi, ops.end(),
                                    [](const Action& a) { return a.op == Op::kBackwardWeight; });
    EXPECT_EQ(tail, r + 1) << describe(s);
  }
  EXPECT_EQ(
      describe(s).substr(0, describe(s).find('\n')),
      "0: F0 F1 F2 F3 Bi0 Bw0 F4 Bi1 Bw1 F5 Bi2 Bw2 F6 Bi3 Bw3 F7 Bi4 Bw4 Bi5 Bw5 Bi6 Bw6 Bi7 Bw7");
}

TEST(Schedule, DescribeIsTheComputeOrder) {
  // pp = 2, m = 3: rank 0 warms up with one forward, rank 1 with none.
  EXPECT_EQ(describe(make("1f1b", 2, 1, 3)),
            "0: F0 F1 B0 F2 B1 B2\n"
            "1: F0 B0 F1 B1 F2 B2\n");
  // pp = 1, v = 2: chunk 0 then chunk 1 of each micro-batch; backward reversed.
  EXPECT_EQ(describe(make("interleaved", 1, 2, 2)), "0: F0.0 F0.1 B0.1 F1.0 B0.0 F1.1 B1.1 B1.0\n");
  EXPECT_STREQ(op_name(Op::kBackwardInput), "Bi");
  EXPECT_STREQ(op_name(Op::kRecvGradient), "recv_grad");
}

TEST(Schedule, CommunicationSitsNextToItsCompute) {
  // pp = 2, m = 2, rank 0: F0 send F1 send recv B0 recv B1.
  const Schedule s = make("1f1b", 2, 1, 2);
  const std::vector<Action>& r0 = s.ranks[0];
  ASSERT_EQ(r0.size(), 8u);
  EXPECT_EQ(r0[1].op, Op::kSendActivation);
  EXPECT_EQ(r0[1].peer, 1);
  EXPECT_EQ(r0[4].op, Op::kRecvGradient);
  EXPECT_EQ(r0[4].micro, 0);
  EXPECT_EQ(r0[5].op, Op::kBackward);
  const std::vector<Action>& r1 = s.ranks[1];
  EXPECT_EQ(r1[0].op, Op::kRecvActivation);
  EXPECT_EQ(r1[3].op, Op::kSendGradient);  // after B0; the last stage receives no gradient
  EXPECT_EQ(r1[3].peer, 0);
}

TEST(Schedule, SwappedSendAndReceiveDeadlocksBothRanks) {
  // Rank 0 waits for gradient 0 before sending activation 0, which rank 1
  // needs before it can compute that gradient.
  const std::string msg = broken(2, 2, [](Schedule& s) {
    std::vector<Action>& r0 = s.ranks[0];
    std::swap(r0[index_of(r0, Op::kSendActivation, 0)], r0[index_of(r0, Op::kRecvGradient, 0)]);
  });
  EXPECT_EQ(
      msg,
      "[schedule] deadlock: rank 0 action 1 (recv_grad micro 0 chunk 0 from 1) waits for rank 1; "
      "rank 1 action 0 (recv_act micro 0 chunk 0 from 0) waits for rank 0");
}

TEST(Schedule, DeletedSendLeavesItsReceiveUnmatched) {
  const std::string msg = broken(2, 2, [](Schedule& s) {
    std::vector<Action>& r0 = s.ranks[0];
    r0.erase(r0.begin() + index_of(r0, Op::kSendActivation, 1));
  });
  EXPECT_EQ(
      msg,
      "[schedule] rank 1 action 4 (recv_act micro 1 chunk 0 from 0): never sent: rank 0 has no "
      "send_act micro 1 chunk 0 to 1");
}

TEST(Schedule, SendToTheWrongPeerIsNamed) {
  const std::string msg = broken(4, 4, [](Schedule& s) { s.ranks[1][2].peer = 3; });
  EXPECT_EQ(msg,
            "[schedule] rank 1 action 2 (send_act micro 0 chunk 0 to 3): stage 1 exchanges its "
            "activation with stage 2 on rank 2, not rank 3");
  EXPECT_NE(broken(4, 4, [](Schedule& s) { s.ranks[1][2].peer = 1; })
                .find("never sends to or receives from itself"),
            std::string::npos);
}

TEST(Schedule, DuplicatedForwardIsNamed) {
  const std::string msg = broken(2, 2, [](Schedule& s) {
    std::vector<Action>& r0 = s.ranks[0];
    r0.insert(r0.begin() + 2, r0[index_of(r0, Op::kForward, 0)]);
  });
  EXPECT_EQ(msg,
            "[schedule] rank 0 action 2 (F micro 0 chunk 0): a second forward of this micro-batch "
            "and chunk");
}

TEST(Schedule, BackwardBeforeItsForwardIsNamed) {
  const std::string msg = broken(2, 2, [](Schedule& s) {
    std::vector<Action>& r1 = s.ranks[1];
    const Action b = r1[index_of(r1, Op::kBackward, 0)];
    r1.erase(r1.begin() + index_of(r1, Op::kBackward, 0));
    r1.insert(r1.begin(), b);
  });
  EXPECT_EQ(msg,
            "[schedule] rank 1 action 0 (B micro 0 chunk 0): the backward runs before the forward "
            "of this "
            "micro-batch and chunk");
}

TEST(Schedule, ForwardBeforeItsActivationIsNamed) {
  const std::string msg =
      broken(2, 2, [](Schedule& s) { std::swap(s.ranks[1][0], s.ranks[1][1]); });
  EXPECT_EQ(
      msg,
      "[schedule] rank 1 action 0 (F micro 0 chunk 0): the forward of stage 1 runs before the "
      "receive of its activation");
}

TEST(Schedule, BrokenWeightGradientsAndSameRankStagesAreNamed) {
  Schedule zb = make("zb-h1", 2, 1, 2);
  std::vector<Action>& r1 = zb.ranks[1];
  r1.erase(r1.begin() + index_of(r1, Op::kBackwardWeight, 1));
  EXPECT_EQ(check_schedule(zb).message(),
            "[schedule] rank 1: micro 1 chunk 0 has a backward-input but no weight gradient");
  std::swap(r1[index_of(r1, Op::kBackwardWeight, 0)], r1[index_of(r1, Op::kBackwardInput, 0)]);
  EXPECT_NE(check_schedule(zb).message().find(
                "(Bw micro 0 chunk 0): the weight gradient runs before its backward-input"),
            std::string::npos)
      << check_schedule(zb).message();
  // One rank holding stages 0 and 1: the forward of stage 1 needs stage 0's.
  Schedule il = make("interleaved", 1, 2, 2);
  std::swap(il.ranks[0][0], il.ranks[0][1]);
  EXPECT_EQ(check_schedule(il).message(),
            "[schedule] rank 0 action 0 (F micro 0 chunk 1): the forward of stage 1 runs before "
            "the forward "
            "of stage 0 it consumes");
}

TEST(Schedule, BadShapesNameTheConstraint) {
  struct Case {
    std::string kind;
    int pp, v, m;
    std::string needle;
  };
  for (const Case& c : std::vector<Case>{
           {"1f1b", 4, 1, 2, "1f1b: m = 2 micro-batches are fewer than pp = 4 stages"},
           {"zb-h1", 4, 1, 3, "zb-h1: m = 3 micro-batches are fewer than pp = 4 stages"},
           {"interleaved", 2, 2, 3,
            "interleaved: m = 3 micro-batches are not a multiple of pp = 2"},
           {"1f1b", 2, 2, 4, "v = 2 virtual stages need the interleaved schedule, not 1f1b"},
           {"zb-h1", 2, 3, 4, "v = 3 virtual stages need the interleaved schedule, not zb-h1"},
           {"gpipe", 2, 1, 4, "unknown schedule 'gpipe' (known: 1f1b, interleaved, zb-h1)"},
           {"1f1b", 0, 1, 4, "pp = 0 must be >= 1"},
           {"interleaved", 2, 0, 4, "v = 0 must be >= 1"},
           {"1f1b", 1, 1, 0, "m = 0 micro-batches must be >= 1"},
       }) {
    Result<Schedule> s = make_schedule(c.kind, c.pp, c.v, c.m);
    ASSERT_FALSE(s) << c.needle;
    EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(s.status().message().rfind("[schedule] " + c.needle, 0), 0u) << s.status().message();
    EXPECT_EQ(s.status().message().find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace crucible::parallel
