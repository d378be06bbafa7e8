// check_schedule and simulate_bubble: both replay a schedule under the
// executor's semantics (sends never block, a receive waits for its matching
// send, messages matched by (kind, micro, stage)), once to find deadlocks and
// once with costs to time it. The checks before the replay make sure every
// message the replay looks up exists exactly once.
#include <algorithm>

#include "core/check.h"
#include "parallel/schedule.h"

namespace crucible::parallel {

namespace {

bool is_send(Op op) { return op == Op::kSendActivation || op == Op::kSendGradient; }
bool is_recv(Op op) { return op == Op::kRecvActivation || op == Op::kRecvGradient; }
bool is_comm(Op op) { return is_send(op) || is_recv(op); }

std::string show(const Action& a) {
  std::string s = std::string(op_name(a.op)) + " micro " + std::to_string(a.micro) + " chunk " +
                  std::to_string(a.chunk);
  if (is_send(a.op)) s += " to " + std::to_string(a.peer);
  if (is_recv(a.op)) s += " from " + std::to_string(a.peer);
  return s;
}

std::string where(int rank, size_t index, const Action& a) {
  return "rank " + std::to_string(rank) + " action " + std::to_string(index) + " (" + show(a) + ")";
}

Status at(int rank, size_t index, const Action& a, const std::string& why) {
  return Status::invalid("[schedule] " + where(rank, index, a) + ": " + why);
}

// A message is the data of one micro-batch crossing from one stage to its
// neighbour: (is gradient, micro, producing stage), numbered densely.
struct Message {
  bool grad;
  int from_stage, to_stage;
};
Message message_of(const Schedule& s, int rank, const Action& a) {
  const int stage = stage_of(s.pp, rank, a.chunk);
  switch (a.op) {
    case Op::kSendActivation:
      return {false, stage, stage + 1};
    case Op::kRecvActivation:
      return {false, stage - 1, stage};
    case Op::kSendGradient:
      return {true, stage, stage - 1};
    default:
      return {true, stage + 1, stage};  // kRecvGradient
  }
}
size_t message_id(const Schedule& s, const Message& msg, int micro) {
  return (size_t(msg.grad) * s.pp * s.v + msg.from_stage) * s.m + micro;
}

// The fields of one action: ranges, and for communication that the
// neighbouring stage exists, lives on another rank and is the peer.
Status check_fields(const Schedule& s, int r, size_t i, const Action& a) {
  if (a.op > Op::kRecvGradient) return at(r, i, a, "not an op");
  if (a.micro < 0 || a.micro >= s.m)
    return at(r, i, a, "micro outside [0, " + std::to_string(s.m) + ")");
  if (a.chunk < 0 || a.chunk >= s.v)
    return at(r, i, a, "chunk outside [0, " + std::to_string(s.v) + ")");
  if (!is_comm(a.op)) {
    if (a.peer != -1) return at(r, i, a, "a compute action has no peer (-1)");
    return Status::ok();
  }
  const Message msg = message_of(s, r, a);
  const int here = stage_of(s.pp, r, a.chunk);
  const int there = msg.from_stage == here ? msg.to_stage : msg.from_stage;
  const std::string what = msg.grad ? "gradient" : "activation";
  if (there < 0 || there >= s.pp * s.v)
    return at(r, i, a,
              "stage " + std::to_string(here) + " has no neighbour stage " + std::to_string(there) +
                  " to exchange an " + what + " with");
  const int expected = rank_of_stage(s.pp, there);
  if (a.peer == r) return at(r, i, a, "a rank never sends to or receives from itself");
  if (expected == r)
    return at(r, i, a,
              "stages " + std::to_string(here) + " and " + std::to_string(there) +
                  " are both on this rank: nothing crosses");
  if (a.peer != expected)
    return at(r, i, a,
              "stage " + std::to_string(here) + " exchanges its " + what + " with stage " +
                  std::to_string(there) + " on rank " + std::to_string(expected) + ", not rank " +
                  std::to_string(a.peer));
  return Status::ok();
}

// One rank's counts and data dependencies, in execution order.
Status check_rank(const Schedule& s, int r) {
  const int stages = s.pp * s.v;
  const size_t units = size_t(s.m) * s.v;
  // Per (micro, chunk) = micro * v + chunk: what has run so far.
  std::vector<char> forward(units), backward(units), input_only(units), weight(units);
  std::vector<char> got_act(units), got_grad(units);
  auto id = [&](int micro, int chunk) { return size_t(micro) * s.v + chunk; };
  const std::vector<Action>& ops = s.ranks[r];
  for (size_t i = 0; i < ops.size(); ++i) {
    const Action& a = ops[i];
    const size_t u = id(a.micro, a.chunk);
    const int st = stage_of(s.pp, r, a.chunk);
    const std::string stage = "stage " + std::to_string(st);
    switch (a.op) {
      case Op::kForward:
        if (forward[u]) return at(r, i, a, "a second forward of this micro-batch and chunk");
        if (st > 0 && rank_of_stage(s.pp, st - 1) == r &&
            !forward[id(a.micro, chunk_of_stage(s.pp, st - 1))])
          return at(r, i, a,
                    "the forward of " + stage + " runs before the forward of stage " +
                        std::to_string(st - 1) + " it consumes");
        if (st > 0 && rank_of_stage(s.pp, st - 1) != r && !got_act[u])
          return at(r, i, a,
                    "the forward of " + stage + " runs before the receive of its activation");
        forward[u] = 1;
        break;
      case Op::kBackward:
      case Op::kBackwardInput:
        if (backward[u]) return at(r, i, a, "a second backward of this micro-batch and chunk");
        if (!forward[u])
          return at(r, i, a, "the backward runs before the forward of this micro-batch and chunk");
        if (st < stages - 1 && rank_of_stage(s.pp, st + 1) == r &&
            !backward[id(a.micro, chunk_of_stage(s.pp, st + 1))])
          return at(r, i, a,
                    "the backward of " + stage + " runs before the backward of stage " +
                        std::to_string(st + 1) + " it consumes");
        if (st < stages - 1 && rank_of_stage(s.pp, st + 1) != r && !got_grad[u])
          return at(r, i, a,
                    "the backward of " + stage + " runs before the receive of its gradient");
        backward[u] = 1;
        (a.op == Op::kBackward ? weight : input_only)[u] = 1;
        break;
      case Op::kBackwardWeight:
        if (weight[u]) return at(r, i, a, "a second weight gradient of this micro-batch and chunk");
        if (!input_only[u])
          return at(r, i, a, "the weight gradient runs before its backward-input");
        weight[u] = 1;
        break;
      case Op::kSendActivation:
        if (!forward[u])
          return at(r, i, a, "sends an activation before the forward that produces it");
        break;
      case Op::kSendGradient:
        if (!backward[u])
          return at(r, i, a, "sends a gradient before the backward that produces it");
        break;
      case Op::kRecvActivation:
        got_act[u] = 1;
        break;
      case Op::kRecvGradient:
        got_grad[u] = 1;
        break;
    }
  }
  for (int j = 0; j < s.m; ++j)
    for (int c = 0; c < s.v; ++c) {
      const size_t u = id(j, c);
      const char* missing = !forward[u]    ? "no forward"
                            : !backward[u] ? "no backward"
                            : !weight[u]   ? "a backward-input but no weight gradient"
                                           : nullptr;
      if (missing)
        return Status::invalid("[schedule] rank " + std::to_string(r) + ": micro " +
                               std::to_string(j) + " chunk " + std::to_string(c) + " has " +
                               missing);
    }
  return Status::ok();
}

// Every message is sent once and received once.
Status check_matching(const Schedule& s) {
  struct End {
    int rank = -1;
    size_t index = 0;
  };
  const size_t messages = 2 * size_t(s.pp) * s.v * s.m;
  std::vector<End> sender(messages), receiver(messages);
  for (int r = 0; r < s.pp; ++r)
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const Action& a = s.ranks[r][i];
      if (!is_comm(a.op)) continue;
      End& end = (is_send(a.op) ? sender : receiver)[message_id(s, message_of(s, r, a), a.micro)];
      if (end.rank >= 0)
        return at(r, i, a,
                  std::string("a second ") + (is_send(a.op) ? "send" : "receive") +
                      " of this message (the first is action " + std::to_string(end.index) + ")");
      end = {r, i};
    }
  for (int r = 0; r < s.pp; ++r)
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const Action& a = s.ranks[r][i];
      if (!is_comm(a.op)) continue;
      const Message msg = message_of(s, r, a);
      const size_t id = message_id(s, msg, a.micro);
      const int peer_stage = is_send(a.op) ? msg.to_stage : msg.from_stage;
      const Action counterpart{is_send(a.op) ? (msg.grad ? Op::kRecvGradient : Op::kRecvActivation)
                                             : (msg.grad ? Op::kSendGradient : Op::kSendActivation),
                               a.micro, chunk_of_stage(s.pp, peer_stage), r};
      if (is_send(a.op) && receiver[id].rank < 0)
        return at(
            r, i, a,
            "never received: rank " + std::to_string(a.peer) + " has no " + show(counterpart));
      if (is_recv(a.op) && sender[id].rank < 0)
        return at(r, i, a,
                  "never sent: rank " + std::to_string(a.peer) + " has no " + show(counterpart));
    }
  return Status::ok();
}

double cost_of(Op op, const Costs& c) {
  switch (op) {
    case Op::kForward:
      return c.f;
    case Op::kBackward:
      return c.b_input + c.b_weight;
    case Op::kBackwardInput:
      return c.b_input;
    case Op::kBackwardWeight:
      return c.b_weight;
    default:
      return 0;  // communication: the cost model counts compute only
  }
}

// Runs every rank as far as it can; with zero costs this is the deadlock
// check, with real costs the timing. Assumes check_fields and check_matching.
struct Replay {
  std::vector<size_t> next;         // per rank: the first action not executed
  std::vector<double> clock, busy;  // per rank: when it got there, compute time spent
};
Replay replay(const Schedule& s, const Costs& c) {
  constexpr double kUnsent = -1;
  std::vector<double> sent_at(2 * size_t(s.pp) * s.v * s.m, kUnsent);
  Replay run{std::vector<size_t>(s.pp, 0), std::vector<double>(s.pp, 0),
             std::vector<double>(s.pp, 0)};
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < s.pp; ++r) {
      const std::vector<Action>& ops = s.ranks[r];
      for (size_t& i = run.next[r]; i < ops.size(); ++i) {
        const Action& a = ops[i];
        if (is_recv(a.op)) {
          const double sent = sent_at[message_id(s, message_of(s, r, a), a.micro)];
          if (sent == kUnsent) break;  // blocked until the peer sends
          run.clock[r] = std::max(run.clock[r], sent);
        } else if (is_send(a.op)) {
          sent_at[message_id(s, message_of(s, r, a), a.micro)] = run.clock[r];
        } else {
          const double cost = cost_of(a.op, c);
          run.clock[r] += cost;
          run.busy[r] += cost;
        }
        progress = true;
      }
    }
  }
  return run;
}

}  // namespace

Status check_schedule(const Schedule& s) {
  if (s.pp < 1 || s.v < 1 || s.m < 1)
    return Status::invalid("[schedule] pp, v and m must be >= 1, not " + std::to_string(s.pp) +
                           ", " + std::to_string(s.v) + ", " + std::to_string(s.m));
  if (int(s.ranks.size()) != s.pp)
    return Status::invalid("[schedule] " + std::to_string(s.ranks.size()) +
                           " rank lists for pp = " + std::to_string(s.pp));
  for (int r = 0; r < s.pp; ++r)
    for (size_t i = 0; i < s.ranks[r].size(); ++i)
      CRUCIBLE_RETURN_IF_ERROR(check_fields(s, r, i, s.ranks[r][i]));
  for (int r = 0; r < s.pp; ++r) CRUCIBLE_RETURN_IF_ERROR(check_rank(s, r));
  CRUCIBLE_RETURN_IF_ERROR(check_matching(s));
  const Replay run = replay(s, Costs{0, 0, 0});
  std::string blocked;
  for (int r = 0; r < s.pp; ++r) {
    const size_t i = run.next[r];
    if (i == s.ranks[r].size()) continue;
    const Action& a = s.ranks[r][i];
    blocked += (blocked.empty() ? "" : "; ") + where(r, i, a) + " waits for rank " +
               std::to_string(a.peer);
  }
  if (!blocked.empty()) return Status::invalid("[schedule] deadlock: " + blocked);
  return Status::ok();
}

std::vector<double> simulate_bubble(const Schedule& s, const Costs& c) {
  CRUCIBLE_CHECK(check_schedule(s).is_ok(),
                 "simulate_bubble needs a schedule check_schedule accepts");
  const Replay run = replay(s, c);
  const double makespan = *std::max_element(run.clock.begin(), run.clock.end());
  std::vector<double> bubble(s.pp);
  for (int r = 0; r < s.pp; ++r) {
    CRUCIBLE_CHECK(run.busy[r] > 0, "simulate_bubble needs positive costs");
    bubble[r] = (makespan - run.busy[r]) / run.busy[r];
  }
  return bubble;
}

}  // namespace crucible::parallel
