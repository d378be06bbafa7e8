#include "plan/time_model.h"

#include <algorithm>
#include <cmath>

#include "parallel/schedule.h"

namespace crucible::plan {

namespace {

// What one rank has of the hardware (a shared node splits over its ranks).
struct Share {
  double peak = 0;       // FLOP/s of the layout's precision
  double bandwidth = 0;  // B/s that streaming kernels reach
  int pi = 0;            // precision index
  const Device* dev = nullptr;
};

// Ranks placed on one node: a device each, filling nodes in rank order; on a
// shared (CPU) node the ranks may outnumber its hardware threads
// (oversubscribed), spread evenly over the nodes.
int ranks_on_node(const Cluster& cl, int64_t world) {
  if (cl.shared_node) return int(std::max<int64_t>(1, (world + cl.nodes - 1) / cl.nodes));
  return int(std::max<int64_t>(1, std::min<int64_t>(world, cl.devices_per_node)));
}

Share share_of(const Cluster& cl, const Candidate& c) {
  Share s;
  s.pi = precision_index(c.precision);
  s.dev = &cl.device;
  const double r = cl.shared_node ? ranks_on_node(cl, c.world()) : 1;
  s.peak = cl.device.peak_flops[s.pi] / r;
  s.bandwidth = cl.device.memory_bandwidth_Bps * cl.device.memory_efficiency / r;
  return s;
}

double gemm_s(const Share& s, double m, double n, double k) {
  return 2 * m * n * k / (s.peak * s.dev->gemm_efficiency_at(s.pi, m, n, k));
}
// forward (m, n, k) and backward's input (m, k, n) and weight (k, n, m) GEMMs
double gemm_fwd(const Share& s, double m, double n, double k) { return gemm_s(s, m, n, k); }
double gemm_bwd(const Share& s, double m, double n, double k) { return gemm_s(s, m, k, n) + gemm_s(s, k, n, m); }

// The link a group of `size` ranks at rank stride `stride` spans: inside a
// node when its ranks fit one (rank r is on node r / devices_per_node),
// else between nodes, each device with its share of a NIC.
struct GroupLink {
  const Link* link;
  double nic_share;  // 1 inside a node
};
GroupLink group_link(const Cluster& cl, int64_t world, int stride, int size) {
  if (int64_t(stride) * size <= ranks_on_node(cl, world)) return {&cl.intra, 1.0};
  return {&cl.inter, 1.0 / cl.devices_per_nic};
}
double comm_s(const GroupLink& g, Collective kind, double bytes, int size) {
  return g.link->time(kind, bytes / g.nic_share, size);
}

struct Chunk {
  double fwd = 0, bwd = 0, recompute = 0, tp = 0;
};

// Kernels one block launches on a GPU (nn/block.cc): forward two fused
// residual+LayerNorms, the QKV, projection and two MLP GEMMs (bias in the
// epilogue), attention, bias+GELU; backward each linear's input-, weight- and
// bias-gradient GEMMs (12), the two LayerNorms', GELU's and attention's.
constexpr double kLaunchesForward = 8, kLaunchesBackward = 16;

// What the GPU waits while the host launches `launches` kernels whose work
// takes `busy` seconds: launches run ahead of the GPU, so only the excess.
double launch_wait(const Stack& st, double launches, double busy) {
  if (st.launch_s <= 0) return 0;
  return std::max(0.0, (st.graphs ? 1 : launches) * st.launch_s - busy);
}

}  // namespace

std::vector<GemmShape> forward_gemms(const nn::GPTConfig& md, const Candidate& c) {
  const double M = double(c.mb) * md.seq_len, C = md.n_embd, tp = c.tp;
  return {{M, 3 * C / tp, C, true},
          {M, C, C / tp, true},
          {M, 4 * C / tp, C, true},
          {M, C, 4 * C / tp, true},
          {M, std::ceil(md.vocab_size / tp), C, false}};
}

namespace {

// One micro-batch through `blocks` blocks (and the embedding / head when the
// chunk holds them) on one rank.
Chunk chunk_time(const nn::GPTConfig& md, const Candidate& c, const Share& s, const GroupLink& tpl, const Stack& st,
                 int blocks, bool embedding, bool head) {
  const double M = double(c.mb) * md.seq_len, C = md.n_embd, T = md.seq_len, V = md.vocab_size;
  const double tp = c.tp, H = md.n_head, hd = C / H;
  const double a = c.precision == "bf16" ? 2 : 4;  // stored activation bytes
  Chunk k;
  double g_f = 0, g_b = 0, head_f = 0, head_b = 0;
  for (const GemmShape& g : forward_gemms(md, c))
    (g.block ? g_f : head_f) += gemm_fwd(s, g.m, g.n, g.k), (g.block ? g_b : head_b) += gemm_bwd(s, g.m, g.n, g.k);
  const double att_flops = 2 * c.mb * (H / tp) * T * T * hd;  // causal: half of 4 b h T^2 d
  const double att_f = att_flops / (s.peak * s.dev->attention_efficiency[s.pi]);
  const double att_b = 2.5 * att_f;
  // Streaming passes per token: two residual+LayerNorms (read x and the
  // branch, write x: 12 C, write the normalised row: a C), bias+GELU (read
  // and write 4C of a), the attention's q/k/v/out (4 a C); backward about
  // twice forward's bytes.
  const double mem_f = M * C * (2 * (12 + a) + 8 * a + 4 * a) / s.bandwidth;
  const double gelu_f = M * C * 8 * a / s.bandwidth;
  const double mem_b = 2 * mem_f;
  // TP: two allreduces of (M, C) each way; sequence parallel an all-gather
  // of the LayerNorm rows (a) and a reduce-scatter each. The sums travel in
  // f32 (crucible's) or the working precision (the stack's tp_comm); what
  // the stack overlaps with the block's GEMMs is hidden, up to their time.
  const double ta = st.tp_comm_working ? a : 4;
  double tp_f = 0;
  if (c.tp > 1)
    tp_f = c.sp ? 2 * (comm_s(tpl, Collective::kAllgather, M * C * a, c.tp) +
                       comm_s(tpl, Collective::kReduceScatter, M * C * ta, c.tp))
                : 2 * comm_s(tpl, Collective::kAllreduce, M * C * ta, c.tp);
  const double tp_fwd = tp_f - std::min(st.tp_overlap * tp_f, g_f);
  const double tp_bwd = tp_f - std::min(st.tp_overlap * tp_f, g_b);
  const double block_f = g_f + att_f + mem_f;
  double rc = 0;
  if (c.recompute == "selective") rc = att_f + gelu_f;
  if (c.recompute == "full") rc = block_f + tp_fwd;
  k.fwd = blocks * block_f;
  k.bwd = blocks * (g_b + att_b + mem_b + rc);
  k.recompute = blocks * rc;
  k.tp = blocks * (tp_fwd + tp_bwd);
  // Launch-bound chunks: the GPU idles while the host launches.
  const double launches_b = kLaunchesBackward + (c.recompute == "full" ? kLaunchesForward : 0);
  k.fwd += launch_wait(st, blocks * kLaunchesForward, k.fwd);
  k.bwd += launch_wait(st, blocks * launches_b, k.bwd);
  if (embedding) k.fwd += M * C * 8 / s.bandwidth, k.bwd += M * C * 8 / s.bandwidth;
  if (head) {  // ln_f, the LM head's GEMM over this rank's vocabulary rows, the fused cross-entropy
    const double Vr = std::ceil(V / tp);
    k.fwd += head_f + M * C * (4 + a) / s.bandwidth + M * Vr * a / s.bandwidth;
    k.bwd += head_b + 2 * M * Vr * a / s.bandwidth + M * C * 8 / s.bandwidth;
    if (c.tp > 1)  // the vocabulary-parallel softmax's row statistics and the embedding's sum
      k.tp += 3 * comm_s(tpl, Collective::kAllreduce, M * 4, c.tp) +
              2 * comm_s(tpl, Collective::kAllreduce, M * C * 4, c.tp);
  }
  return k;
}

}  // namespace

uint64_t device_memory(const Cluster& cl, int64_t world) {
  return uint64_t(cl.device.memory_bytes / (cl.shared_node ? ranks_on_node(cl, world) : 1));
}

Prediction predict(const nn::GPTConfig& md, const Candidate& c, const Cluster& cl) {
  Prediction p;
  p.layout = c;
  if (!cl.shared_node && c.world() > cl.devices()) {
    p.why_not = "needs " + std::to_string(c.world()) + " devices; the cluster has " + std::to_string(cl.devices());
    return p;
  }
  if (c.tp > ranks_on_node(cl, c.world()) && c.tp > cl.devices_per_node) {
    p.why_not = "tp = " + std::to_string(c.tp) + " spans nodes (a node has " + std::to_string(cl.devices_per_node) +
                " devices; TP groups stay inside one)";
    return p;
  }
  auto layout = check(md, c);
  if (!layout) {
    p.why_not = layout.status().message();
    return p;
  }
  const parallel::Layout& L = *layout;
  p.divides = true;
  const LargestRank big = largest_rank(md, c, L, cl.device.bf16_widened);
  p.memory = big.estimate;
  p.peak_rank = big.rank;
  p.device_memory_bytes = device_memory(cl, c.world());
  // On a GPU the checkpoint copy is host memory; on a shared CPU node it is
  // the same memory as everything else.
  const uint64_t need = p.memory.allocator_bytes() + (cl.shared_node ? p.memory.snapshot : 0);
  p.fits = need <= p.device_memory_bytes;
  p.runs = p.fits;
  if (!p.fits)
    p.why_not = "does not fit: needs " + format_bytes(need) + " on rank " + std::to_string(big.rank) + " (" +
                p.memory.describe() + "), a device has " + format_bytes(p.device_memory_bytes);

  const Share s = share_of(cl, c);
  const int64_t W = c.world();
  const GroupLink tpl = group_link(cl, W, 1, c.tp), ppl = group_link(cl, W, c.tp, c.pp),
                  dpl = group_link(cl, W, c.tp * c.pp, c.dp);
  // The slowest pipeline stage per micro-batch (all its chunks).
  const double M = double(c.mb) * md.seq_len;
  const double boundary = M * md.n_embd * 4 / (L.sequence_parallel() ? c.tp : 1);
  double worst = -1;
  Chunk crit;
  for (int pi = 0; pi < c.pp; ++pi) {
    Chunk st;
    for (int k = 0; k < c.v; ++k) {
      const nn::BlockRange br = L.stage_blocks(md, parallel::stage_of(c.pp, pi, k));
      Chunk ch = chunk_time(md, c, s, tpl, cl.stack, br.last - br.first, pi == 0 && k == 0,
                            pi == c.pp - 1 && k == c.v - 1);
      st.fwd += ch.fwd, st.bwd += ch.bwd, st.recompute += ch.recompute, st.tp += ch.tp;
    }
    if (st.fwd + st.bwd + st.tp > worst) worst = st.fwd + st.bwd + st.tp, crit = st;
  }
  Breakdown& b = p.breakdown;
  const double m = c.m;
  b.forward = m * crit.fwd;
  b.backward = m * crit.bwd;
  b.recompute = m * crit.recompute;
  b.tp_comm = m * crit.tp;
  if (c.pp > 1) {
    // Each micro-batch's activation in and gradient out per chunk boundary.
    b.pp_comm = m * c.v * 2 * comm_s(ppl, Collective::kP2p, boundary, 2);
    b.bubble = parallel::theoretical_bubble(c.schedule, c.pp, c.v, c.m) * (b.forward + b.backward + b.tp_comm + b.pp_comm);
  }
  // Data parallel: the stage's gradients (and ZeRO's parameters) on the DP link.
  const nn::GPTPart part = part_of(md, L, L.coords(big.rank), c);
  const double P = double(nn::GPT::flat_params(md, part));
  const double gb = c.grad_dtype == "bf16" ? 2 : 4;
  if (c.dp > 1) {
    double reduce = c.zero == 2 ? comm_s(dpl, Collective::kReduceScatter, P * gb, c.dp)
                                : comm_s(dpl, Collective::kAllreduce, P * gb, c.dp);
    const double gather = c.zero > 0 ? comm_s(dpl, Collective::kAllgather, P * 4, c.dp) : 0;
    if (c.overlap) {
      const double bucket = std::min(P * gb, c.bucket_mb * 1e6);
      const double last = reduce * bucket / (P * gb);
      reduce = std::max(last, reduce - crit.bwd);
    }
    b.dp_comm = reduce + gather;
  }
  if (c.pp > 1)  // wte's gradient summed between the first and last stage
    b.dp_comm += comm_s(group_link(cl, W, c.tp * (c.pp - 1), 2), Collective::kAllreduce,
                        std::ceil(double(md.vocab_size) / c.tp) * md.n_embd * 4, 2);
  // AdamW streams its shard: read p g m v, write p m v (+ the bf16 copy);
  // the norm reads every gradient; zeroing writes them.
  const double shard = c.zero > 0 && c.dp > 1 ? P / c.dp : P;
  const double mo = c.moments == "bf16" ? 2 : 4;
  b.optimizer = (shard * (12 + 4 * mo + (c.precision == "bf16" ? 2 : 0)) + P * 4) / s.bandwidth;
  b.other = P * 4 / s.bandwidth + cl.step_overhead_s;
  b.data_wait = cl.data_wait_s;
  p.step_time_s = b.total();
  const double tokens = double(c.global_batch()) * md.seq_len;
  p.tokens_per_s = tokens / p.step_time_s;
  p.model_flops_per_step = md.flops_per_token(md.seq_len) * tokens;
  const double peak_all = cl.shared_node ? cl.device.peak_flops[s.pi] * std::ceil(double(c.world()) / cl.devices_per_node)
                                         : cl.device.peak_flops[s.pi] * c.world();
  p.mfu = p.model_flops_per_step / p.step_time_s / peak_all;
  // Energy: every device (a shared node: every node in use) at its power
  // under load for the whole step, idle waits included.
  const double powered =
      cl.shared_node ? std::ceil(double(c.world()) / cl.devices_per_node) : double(c.world());
  p.energy_j_per_token = cl.device.power_w * powered * p.step_time_s / tokens;
  return p;
}

nlohmann::json to_json(const Prediction& p) {
  const Candidate& c = p.layout;
  nlohmann::json j = {
      {"layout", {{"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp}, {"v", c.v}, {"mb", c.mb}, {"m", c.m},
                  {"zero", c.zero}, {"recompute", c.recompute}, {"sp", c.sp}, {"schedule", c.schedule},
                  {"precision", c.precision}, {"moments", c.moments}, {"grad_dtype", c.grad_dtype},
                  {"split", c.split}, {"global_batch", c.global_batch()}, {"devices", c.world()}}},
      {"layout_text", c.describe()},
      {"runs", p.runs},
      {"fits", p.fits}};
  if (!p.runs) {
    j["why_not"] = p.why_not;
    if (p.memory.total() == 0) return j;
  }
  const MemoryEstimate& e = p.memory;
  j["peak_memory_bytes"] = e.allocator_bytes();
  j["peak_rank"] = p.peak_rank;
  j["device_memory_bytes"] = p.device_memory_bytes;
  j["memory"] = {{"weights", e.weights},         {"gradients", e.grads}, {"optimizer", e.optimizer},
                 {"activations", e.activations}, {"other", e.other},     {"checkpoint_copy", e.snapshot},
                 {"contexts", e.contexts}};
  if (!p.divides) return j;
  const Breakdown& b = p.breakdown;
  j["step_time_s"] = p.step_time_s;
  j["tokens_per_s"] = p.tokens_per_s;
  j["mfu"] = p.mfu;
  if (p.energy_j_per_token > 0) j["energy_j_per_token"] = p.energy_j_per_token;
  j["model_flops_per_step"] = p.model_flops_per_step;
  j["breakdown"] = {{"forward", b.forward},     {"backward", b.backward}, {"tp_comm", b.tp_comm},
                    {"pp_comm", b.pp_comm},     {"bubble", b.bubble},     {"dp_comm", b.dp_comm},
                    {"optimizer", b.optimizer}, {"data_wait", b.data_wait}, {"other", b.other}};
  j["recompute_s"] = b.recompute;
  return j;
}

}  // namespace crucible::plan
