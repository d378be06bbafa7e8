#include "parallel/layout.h"

#include <algorithm>

#include "parallel/schedule.h"

namespace crucible::parallel {

namespace {

Status bad(const std::string& key, const std::string& why) {
  return Status::invalid("[layout] " + key + ": " + why);
}

}  // namespace

Result<Layout> Layout::make(const LayoutSpec& s, int world, const nn::GPTConfig& m, int micro) {
  if (s.tp < 1) return bad("dist.tp", std::to_string(s.tp) + " must be >= 1");
  if (s.pp < 1) return bad("dist.pp", std::to_string(s.pp) + " must be >= 1");
  if (s.virtual_stages < 1) return bad("dist.pp_virtual", std::to_string(s.virtual_stages) + " must be >= 1");
  // Products in 64 bits: tp x pp or pp x v past int would wrap (to 0: a
  // division by zero).
  constexpr int64_t kMax = int64_t(1) << 24;
  if (int64_t(s.tp) * s.pp > kMax) return bad("dist.tp x dist.pp", "more than " + std::to_string(kMax) + " ranks");
  if (int64_t(s.pp) * s.virtual_stages > kMax)
    return bad("dist.pp", "model.n_layer = " + std::to_string(m.n_layer) + " is fewer blocks than pp x pp_virtual = " +
                              std::to_string(int64_t(s.pp) * s.virtual_stages) + " stages");
  if (std::find(std::begin(kSchedules), std::end(kSchedules), s.schedule) == std::end(kSchedules))
    return bad("dist.pp_schedule", "'" + s.schedule + "' is not one of 1f1b, interleaved, zb-h1");
  if (world % (s.tp * s.pp) != 0)
    return bad("dist.tp x dist.pp", std::to_string(s.tp) + " x " + std::to_string(s.pp) +
                                        " does not divide the world of " + std::to_string(world) +
                                        " ranks (dp x tp x pp must equal it)");
  if (m.n_head % s.tp != 0)
    return bad("dist.tp", "model.n_head = " + std::to_string(m.n_head) + " does not divide by tp = " +
                              std::to_string(s.tp) + " (each rank owns whole heads)");
  if ((4 * m.n_embd) % s.tp != 0)
    return bad("dist.tp", "the MLP width 4 x model.n_embd = " + std::to_string(4 * m.n_embd) +
                              " does not divide by tp = " + std::to_string(s.tp));
  if (s.virtual_stages > 1 && s.schedule != "interleaved")
    return bad("dist.pp_virtual", std::to_string(s.virtual_stages) +
                                      " virtual stages need dist.pp_schedule = \"interleaved\"");
  if (std::find(std::begin(kSplits), std::end(kSplits), s.split) == std::end(kSplits))
    return bad("dist.pp_split", "'" + s.split + "' is not one of even, cost");
  const int stages = s.pp * s.virtual_stages;
  if (s.split == "even" && m.n_layer % stages != 0)
    return bad("dist.pp", "model.n_layer = " + std::to_string(m.n_layer) + " does not split over pp x pp_virtual = " +
                              std::to_string(stages) + " stages (or set dist.pp_split = \"cost\")");
  if (m.n_layer < stages)
    return bad("dist.pp", "model.n_layer = " + std::to_string(m.n_layer) + " is fewer blocks than pp x pp_virtual = " +
                              std::to_string(stages) + " stages");
  if (s.pp > 1 && micro < s.pp)
    return bad("train.grad_accum", std::to_string(micro) + " micro-batches are fewer than pp = " +
                                       std::to_string(s.pp) + " stages (the pipeline would never fill)");
  if (s.pp > 1 && s.schedule == "interleaved" && micro % s.pp != 0)
    return bad("train.grad_accum", std::to_string(micro) + " micro-batches are not a multiple of pp = " +
                                       std::to_string(s.pp) + " (the interleaved schedule's rounds)");
  Layout l;
  l.tp_ = s.tp;
  l.pp_ = s.pp;
  l.v_ = s.virtual_stages;
  l.dp_ = world / (s.tp * s.pp);
  l.schedule_ = s.schedule;
  l.sp_ = s.sequence_parallel && s.tp > 1;
  l.split_ = s.split;
  return l;
}

nn::GPTPart stage_part(const Layout& layout, const Coords& at, const nn::GPTConfig& model) {
  const int pp = layout.pp(), v = layout.virtual_stages();
  nn::GPTPart part;
  for (int c = 0; c < v; ++c) part.chunks.push_back(layout.stage_blocks(model, stage_of(pp, at.pp, c)));
  part.embedding = at.pp == 0;
  part.head = at.pp == pp - 1;
  part.tp = layout.tp();
  part.tp_rank = at.tp;
  part.sequence_parallel = layout.sequence_parallel();
  return part;
}

std::vector<int> cost_balanced_blocks(const nn::GPTConfig& m, int stages) {
  const double C = m.n_embd, T = m.seq_len, V = m.vocab_size;
  const double block = 24 * C * C + 2 * T * C, head = 2 * C * V + 5 * V;
  const int L = m.n_layer;
  // best[s][n]: the least possible maximum over stages s.. holding the last n blocks.
  std::vector<std::vector<double>> best(size_t(stages) + 1, std::vector<double>(size_t(L) + 1, 1e300));
  std::vector<std::vector<int>> take(size_t(stages), std::vector<int>(size_t(L) + 1, 0));
  best[size_t(stages)][0] = 0;
  for (int s = stages - 1; s >= 0; --s)
    for (int n = stages - s; n <= L - s; ++n)
      for (int k = 1; k <= n - (stages - s - 1); ++k) {  // stage s takes k blocks
        const double cost = std::max(k * block + (s == stages - 1 ? head : 0.0), best[size_t(s) + 1][size_t(n - k)]);
        if (cost < best[size_t(s)][size_t(n)] * (1 - 1e-12)) best[size_t(s)][size_t(n)] = cost, take[size_t(s)][size_t(n)] = k;
      }
  std::vector<int> counts;
  for (int s = 0, n = L; s < stages; n -= counts.back(), ++s) counts.push_back(take[size_t(s)][size_t(n)]);
  return counts;
}

nn::BlockRange Layout::stage_blocks(const nn::GPTConfig& m, int stage) const {
  const int stages = pp_ * v_;
  if (split_ == "even") {
    const int per = m.n_layer / stages;
    return {stage * per, (stage + 1) * per};
  }
  const std::vector<int> counts = cost_balanced_blocks(m, stages);
  int first = 0;
  for (int s = 0; s < stage; ++s) first += counts[size_t(s)];
  return {first, first + counts[size_t(stage)]};
}

Coords Layout::coords(int rank) const { return {rank / (tp_ * pp_), (rank / tp_) % pp_, rank % tp_}; }

int Layout::rank_of(const Coords& c) const { return (c.dp * pp_ + c.pp) * tp_ + c.tp; }

std::vector<int> Layout::tp_group(int rank) const {
  Coords c = coords(rank);
  std::vector<int> g;
  for (c.tp = 0; c.tp < tp_; ++c.tp) g.push_back(rank_of(c));
  return g;
}

std::vector<int> Layout::pp_group(int rank) const {
  Coords c = coords(rank);
  std::vector<int> g;
  for (c.pp = 0; c.pp < pp_; ++c.pp) g.push_back(rank_of(c));
  return g;
}

std::vector<int> Layout::dp_group(int rank) const {
  Coords c = coords(rank);
  std::vector<int> g;
  for (c.dp = 0; c.dp < dp_; ++c.dp) g.push_back(rank_of(c));
  return g;
}

std::string Layout::describe() const {
  return "dp=" + std::to_string(dp_) + " tp=" + std::to_string(tp_) + (sp_ ? " (sequence parallel)" : "") +
         " pp=" + std::to_string(pp_) + " (v=" + std::to_string(v_) + ", " + schedule_ + ")";
}

std::string tp_hosts_warning(const Layout& l, const std::vector<std::string>& hosts) {
  if (l.tp() < 2 || int(hosts.size()) != l.world()) return "";
  for (int first = 0; first < l.world(); first += l.tp()) {  // tp varies fastest: groups are runs
    std::vector<std::string> on;
    for (int r : l.tp_group(first))
      if (std::find(on.begin(), on.end(), hosts[size_t(r)]) == on.end()) on.push_back(hosts[size_t(r)]);
    if (on.size() < 2) continue;
    std::string names;
    for (const std::string& h : on) names += (names.empty() ? "" : ", ") + h;
    const std::string t = std::to_string(l.tp());
    return "[dist] warning: the tensor-parallel group of ranks " + std::to_string(first) + "-" +
           std::to_string(first + l.tp() - 1) + " spans hosts " + names +
           ": its allreduces cross the network every block; give each host a multiple of dist.tp = " + t +
           " slots (ranks fill hosts in order)";
  }
  return "";
}

Result<Groups> make_groups(comm::Comm& world, const Layout& l) {
  if (world.size() != l.world())
    return Status::invalid("[layout] the layout is for " + std::to_string(l.world()) + " ranks, the world has " +
                           std::to_string(world.size()));
  const Coords c = l.coords(world.rank());
  Groups g;
  // A group's color is the index of what its members share; the key orders them.
  auto tp = world.split(c.dp * l.pp() + c.pp, c.tp);
  if (!tp) return tp.status();
  auto pp = world.split(c.dp * l.tp() + c.tp, c.pp);
  if (!pp) return pp.status();
  auto dp = world.split(c.pp * l.tp() + c.tp, c.dp);
  if (!dp) return dp.status();
  g.tp = std::move(*tp);
  g.pp = std::move(*pp);
  g.dp = std::move(*dp);
  return g;
}

}  // namespace crucible::parallel
