// This machine as a cluster description, from `crucible probe`'s document
// (plan/cluster.h, cluster_from_probe).
#include <algorithm>
#include <cmath>
#include <vector>

#include "plan/cluster.h"
#include "profile/probe_step_gemms.h"
#include "profile/probe_schema.h"

namespace crucible::plan {

namespace {

using nlohmann::json;

const json* at(const json& j, std::initializer_list<const char*> path) {
  const json* p = &j;
  for (const char* k : path) {
    if (!p->is_object() || !p->contains(k)) return nullptr;
    p = &(*p)[k];
  }
  return p;
}

double number(const json& j, std::initializer_list<const char*> path, double otherwise) {
  const json* p = at(j, path);
  return p && p->is_number() ? p->get<double>() : otherwise;
}

// A collective's alpha-beta from the probe's sizes: the latency from the
// smallest message (per ring hop), the bus bandwidth from the largest.
bool fit_collective(const json& rows, double hops_per_rank, int n, AlphaBeta* out) {
  if (!rows.is_array() || rows.empty()) return false;
  const json* small = nullptr;
  const json* big = nullptr;
  for (const json& r : rows) {
    if (!r.value("valid", false) || !r.contains("time_us") || !r.contains("busbw_gbs")) continue;
    if (!small) small = &r;
    big = &r;
  }
  if (!small || !big || big->value("busbw_gbs", 0.0) <= 0) return false;
  out->latency_s = small->value("time_us", 0.0) * 1e-6 / std::max(1.0, hops_per_rank * (n - 1));
  out->bandwidth_Bps = big->value("busbw_gbs", 0.0) * 1e9;
  return true;
}

Result<Cluster> from_probe(const json& probe, const std::string& source, NodeKind kind);
Result<Cluster> gpu_node(const json& probe, Cluster c, const std::string& source);
void links_from_probe(const json& probe, double triad, Cluster& c);

}  // namespace

// A member of the wrong JSON type is a bad probe file, not a crash.
Result<Cluster> cluster_from_probe(const json& probe, const std::string& source, NodeKind kind) {
  CRUCIBLE_RETURN_IF_ERROR(profile::check_probe_document(probe, source));
  try {
    auto c = from_probe(probe, source, kind);
    if (!c) return c;
    // Never a cluster its own reader refuses (a peak or a latency beyond
    // the cluster file's bounds): refused here, naming the probe.
    if (Status s = check_cluster(*c); !s) {
      const std::string prefix = "[plan] " + source + ": ", why = s.message();
      return Status::invalid(prefix + "gives a cluster description outside its bounds: " +
                             (why.rfind(prefix, 0) == 0 ? why.substr(prefix.size()) : why));
    }
    return c;
  } catch (const json::exception& e) {
    return Status::invalid("[plan] " + source + ": not a well-formed probe document (" + std::string(e.what()) + ")");
  }
}

namespace {

// The links between ranks and the node count (the interconnect and hosts
// sections): shared memory inside a node, an assumption where the probe ran
// on one rank (a memory copy's bandwidth from STREAM triad, a few us).
void links_from_probe(const json& probe, double triad, Cluster& c) {
  if (triad <= 0) triad = 100;  // no memory section (a GPU node's gpu-only probe)
  AlphaBeta base{5e-6, triad * 1e9 / 2};
  for (int k = 0; k < 4; ++k) c.intra.kinds[k] = base;
  if (const json* ic = at(probe, {"interconnect"}); ic && ic->value("ranks", 1) > 1) {
    const int n = ic->value("ranks", 2);
    const char* names[] = {"allreduce", "allgather", "reduce_scatter"};
    const double hops[] = {2, 1, 1};
    for (int k = 0; k < 3; ++k)
      if (const json* rows = at(*ic, {"collectives", names[k], "comm"}))
        fit_collective(*rows, hops[k], n, &c.intra.kinds[k]);
    if (const json* pp = at(*ic, {"pingpong"}); pp && pp->is_array() && !pp->empty()) {
      const json& first = (*pp)[0];
      c.intra.kinds[3] = {first.value("latency_us", 5.0) * 1e-6, first.value("bandwidth_gbs", triad / 2) * 1e9};
    }
  }
  c.inter = c.intra;
  // Several hosts (profile/probe_hosts.h): the link between them from the
  // inter-host ping-pong pairs, for every collective kind (a ring's hop is
  // one such message), and the node count from the hosts probed.
  // The collectives then spanned both kinds of link, so inside a host the
  // intra-host pairs say more than they do.
  auto pingpong_link = [&](const char* kind, Link* out) {
    if (const json* l = at(probe, {"interconnect", "links", kind}); l && l->is_object()) {
      const AlphaBeta link{l->value("latency_us", 50.0) * 1e-6, l->value("bandwidth_gbs", 1.0) * 1e9};
      for (int k = 0; k < 4; ++k) out->kinds[k] = link;
    }
  };
  if (at(probe, {"interconnect", "links", "inter_host"})) {
    pingpong_link("intra_host", &c.intra);
    pingpong_link("inter_host", &c.inter);
  }
  if (const json* hosts = at(probe, {"hosts"}); hosts && hosts->is_array() && hosts->size() > 1)
    c.nodes = int(hosts->size());
}

Result<Cluster> from_probe(const json& probe, const std::string& source, NodeKind kind) {
  auto bad = [&](const std::string& why) { return Status::invalid("[plan] " + source + ": " + why); };
  if (!probe.is_object() || probe.value("schema", "") != "crucible-probe/1")
    return bad("not a probe document (schema crucible-probe/1)");
  const bool gpus = number(probe, {"gpu", "count"}, 0) > 0;
  if (kind == NodeKind::kGpu && !gpus)
    return bad("has no gpu section with a GPU (run crucible probe --sections gpu on the GPU node)");
  // A GPU node: its GPUs are the devices; the CPU's sections are not needed.
  if (gpus && kind != NodeKind::kCpu) {
    Cluster c;
    c.source = source;
    c.name = "this machine (" + probe.value("host", std::string("?")) + ")";
    links_from_probe(probe, number(probe, {"memory", "threads_all", "triad", "best_gbs"}, 0), c);
    return gpu_node(probe, c, source);
  }
  const double fma = number(probe, {"compute", "peak", "measured_fma_gflops_all"}, 0);
  const json* gemms = at(probe, {"compute", "gemm"});
  if (fma <= 0 || !gemms || !gemms->is_array()) return bad("has no compute section (run crucible probe)");
  const double triad = number(probe, {"memory", "threads_all", "triad", "best_gbs"}, 0);
  if (triad <= 0) return bad("has no memory section (run crucible probe)");
  const int threads = int(number(probe, {"compute", "peak", "threads_all"}, 1));
  const bool bf16_native = probe.value("compute", json::object()).value("bf16_native", false);

  Cluster c;
  c.source = source;
  c.name = "this machine (" + probe.value("host", std::string("?")) + ")";
  c.nodes = 1;
  c.devices_per_node = std::max(1, int(number(probe, {"cpu", "hardware_threads"}, threads)));
  c.shared_node = true;
  Device& d = c.device;
  d.name = probe.value("cpu", json::object()).value("model", std::string("CPU"));
  // The peak: the derived one (lanes x pipes x clock x threads), as the
  // trainer's MFU counts it, unless the FMA loop on all threads disagrees
  // with it by more than 2x (the derived clock is wrong on some VMs: then the
  // loop's figure). A peak below what a measured GEMM reached is no peak (a busy or
  // throttled FMA loop): then 1.25x the best GEMM, so that every efficiency,
  // and its calibration, stays below 1.
  const double derived = number(probe, {"compute", "peak", "derived_gflops_all"}, 0);
  double peak = derived > 0 && fma >= 0.5 * derived && fma <= 1.1 * derived ? derived : fma;
  // bf16's ceiling as the probe measured it (AMX's where there is one,
  // profile/cpu_peak.h); older probes: twice f32's with a native bf16 matmul.
  double bf16_peak = number(probe, {"compute", "peak", "bf16_peak_gflops_all"}, 0);
  if (bf16_peak <= 0) bf16_peak = peak * (bf16_native ? 2 : 1);
  double best[2] = {0, 0};
  for (const json& g : *gemms)
    if (g.value("valid", false) && g.value("threads", 0) == threads) {
      const int p = g.value("dtype", "") == "bf16" ? 1 : 0;
      best[p] = std::max(best[p], g.value("gflops", 0.0));
    }
  if (best[0] > peak) peak = 1.25 * best[0];
  if (best[1] > bf16_peak) bf16_peak = 1.25 * best[1];
  d.peak_flops[0] = peak * 1e9;
  d.peak_flops[1] = std::max(bf16_peak, bf16_native ? 0.0 : peak) * 1e9;
  // The node's memory: the NUMA nodes' sum.
  double mem = 0;
  if (const json* nodes = at(probe, {"topology", "numa_nodes"}); nodes && nodes->is_array())
    for (const json& n : *nodes) mem += n.value("memory_bytes", 0.0);
  d.memory_bytes = mem > 0 ? mem : 8e9;
  d.memory_bandwidth_Bps = triad * 1e9;
  d.memory_efficiency = 1;  // STREAM triad is already what streaming code reaches
  // The packages' power under the throttle section's full load (RAPL), where
  // the machine exposes it: the node's, as its peak is the node's.
  d.power_w = number(probe, {"throttle", "power_w"}, 0.0);
  d.bf16_widened = !bf16_native;
  // GEMM efficiency against size from the all-thread rows, per precision
  // (the best where sizes repeat). Rows timed inside a replayed step (form
  // "in_step": a run's own GEMMs, profile/probe_step_gemms.h) come first and
  // stand for their shapes; rows timed alone fill in the other shapes.
  for (int p = 0; p < 2; ++p) {
    auto& points = d.gemm_efficiency[p];
    size_t step_points = 0;  // points[0, step_points) came from in-step rows
    for (const bool step_pass : {true, false}) {
      for (const json& g : *gemms) {
        if (!g.value("valid", false) || g.value("dtype", "") != (p ? "bf16" : "f32") ||
            g.value("threads", 0) != threads || profile::gemm_row_is_in_step(g) != step_pass)
          continue;
        const double m = g.value("m", 0.0), n = g.value("n", 0.0), k = g.value("k", 0.0);
        const double eff = std::min(1.0, g.value("gflops", 0.0) * 1e9 / d.peak_flops[p]);
        if (m < 1 || n < 1 || k < 1 || eff <= 0) continue;
        auto same = std::find_if(points.begin(), points.end(),
                                 [&](const Device::GemmPoint& q) { return q.m == m && q.n == n && q.k == k; });
        if (same == points.end()) points.push_back({m, n, k, eff});
        else if (step_pass || size_t(same - points.begin()) >= step_points) same->efficiency = std::max(same->efficiency, eff);
      }
      if (step_pass) step_points = points.size();
    }
    // Without a native bf16 matmul, bf16 runs widened to the f32 path (and the
    // probe measures it only where the thread counts differ): the f32 rows.
    if (p == 1 && d.gemm_efficiency[1].empty() && !bf16_native) d.gemm_efficiency[1] = d.gemm_efficiency[0];
    if (d.gemm_efficiency[p].empty()) return bad(std::string("has no valid all-thread ") + (p ? "bf16" : "f32") + " GEMM rows");
  }
  // Crucible's attention kernel is not in the probe: a fraction of the GEMM
  // ceiling (its tiles are small), refitted by `crucible plan --calibrate`.
  // In bf16 it keeps less of the doubled peak than the GEMMs do: with a native
  // bf16 matmul (x86: AVX512_BF16, so the kernel's products run in vdpbf16ps
  // pairs) its exponentials and packing do not get faster (measured on Zen 4:
  // 0.5-0.75 of its fp32 share, docs/performance.md); without one, bf16 runs
  // widened at the f32 rate against the f32 peak, the fp32 share.
  // A run's probe measures its own attention (compute.attention, the last row
  // of a precision: the run's, profile/local_probe.cc); that stands instead.
  for (int p = 0; p < 2; ++p) {
    double best = 0;
    for (const Device::GemmPoint& g : d.gemm_efficiency[p]) best = std::max(best, g.efficiency);
    d.attention_efficiency[p] = std::min(1.0, 0.5 * best * (p && bf16_native ? 0.6 : 1.0));
    if (const json* rows = at(probe, {"compute", "attention"}); rows && rows->is_array())
      for (const json& r : *rows)
        if (r.is_object() && r.value("dtype", "") == (p ? "bf16" : "f32") && r.value("threads", 0) == threads &&
            r.value("valid", false) && r.value("gflops", 0.0) > 0)
          d.attention_efficiency[p] = std::min(1.0, r["gflops"].get<double>() * 1e9 / d.peak_flops[p]);
  }
  links_from_probe(probe, triad, c);
  if (c.devices_per_node > (1 << 24) || d.memory_bytes > 1e15)
    return bad("cpu.hardware_threads or the NUMA memory is out of range");
  return c;
}

// A GPU node (the probe's gpu section, profile/probe_gpu.h): its GPUs are the
// devices, each with what the probe measured of the first one. The peak is
// the GEMM ceiling measured through the step's own cuBLASLt path, the figure
// a GPU run quotes its MFU against (docs/gpu.md); the efficiency table is the
// ceiling's square shape and the transformer-step shapes the probe timed,
// refitted by `crucible plan --calibrate` from a run. The link between ranks:
// with several GPUs whose every pair has direct peer access (gpu.peers),
// NCCL's rings run over those links, as fast as the slowest pair; otherwise
// (one GPU, or pairs staged by the driver) ranks share a GPU or cross the
// host: staged through pinned host memory (comm/device_comm.h), each
// collective crossing the host link twice, plus MPI's latency.
Result<Cluster> gpu_node(const json& probe, Cluster c, const std::string& source) {
  auto bad = [&](const std::string& why) { return Status::invalid("[plan] " + source + ": " + why); };
  const json* devs = at(probe, {"gpu", "devices"});
  if (!devs || !devs->is_array() || devs->empty() || !(*devs)[0].is_object()) return bad("gpu.devices is empty");
  const json& g = (*devs)[0];
  if (g.contains("error")) return bad("gpu.devices[0]: " + g.value("error", std::string("?")));
  const double bf16 = g.value("bf16_gemm_tflops", 0.0), f32 = g.value("f32_gemm_tflops", 0.0);
  const double copy = g.value("copy_gbs", 0.0), n = g.value("gemm_n", 0.0);
  if (bf16 <= 0 || f32 <= 0 || copy <= 0 || n < 1)
    return bad("gpu.devices[0] lacks its GEMM ceilings or copy bandwidth (run crucible probe on the GPU node)");
  c.devices_per_node = int(std::max(1.0, number(probe, {"gpu", "count"}, 1)));
  c.shared_node = false;
  c.devices_per_nic = c.devices_per_node;  // one host NIC, unless the file is edited
  Device& d = c.device;
  d.name = g.value("name", std::string("GPU"));
  d.memory_bytes = g.value("memory_bytes", 0.0);
  if (d.memory_bytes <= 0) return bad("gpu.devices[0].memory_bytes is missing");
  d.memory_bandwidth_Bps = copy * 1e9;  // bytes read plus written per second, as kernels stream
  d.memory_efficiency = 1;
  // The step's own shapes where the probe timed them (gpu.devices[0].gemm);
  // a shape faster than the square ceiling raises the peak (a ceiling below a
  // measurement is no ceiling).
  // The tf32 rows are not a precision crucible trains in: not in the table.
  double peak[2] = {f32, bf16};
  const json rows = g.value("gemm", json::array());
  auto precision = [](const json& r) {
    const std::string d = r.is_object() ? r.value("dtype", "") : "";
    return d == "bf16" ? 1 : d == "f32" ? 0 : -1;
  };
  for (const json& r : rows)
    if (precision(r) >= 0 && r.value("tflops", 0.0) > 0)
      peak[precision(r)] = std::max(peak[precision(r)], r.value("tflops", 0.0));
  d.peak_flops[0] = peak[0] * 1e12, d.peak_flops[1] = peak[1] * 1e12;
  d.gemm_efficiency[0] = {{n / 2, n / 2, n / 2, f32 / peak[0]}};  // f32 is timed at half the size
  d.gemm_efficiency[1] = {{n, n, n, bf16 / peak[1]}};
  for (const json& r : rows) {
    const double m = r.value("m", 0.0), nn = r.value("n", 0.0), k = r.value("k", 0.0), tf = r.value("tflops", 0.0);
    const int p = precision(r);
    if (p < 0 || m < 1 || nn < 1 || k < 1 || tf <= 0) continue;
    d.gemm_efficiency[p].push_back({m, nn, k, tf / peak[p]});
  }
  // The attention kernel: FlashAttention-2-class kernels reach about half of
  // the GEMM ceiling on Hopper ([FA2]), refitted by --calibrate from a run;
  // a run's own probe times its attention on the GPU
  // (gpu.devices[0].attention, the last row of a precision:
  // profile/local_probe.h), which stands instead.
  d.attention_efficiency[0] = d.attention_efficiency[1] = 0.5;
  for (const json& r : g.value("attention", json::array()))
    if (const int p = precision(r); p >= 0 && r.value("tflops", 0.0) > 0)
      d.attention_efficiency[p] = std::min(1.0, r["tflops"].get<double>() / peak[p]);
  d.bf16_widened = false;
  d.power_w = number(g, {"load", "mean_power_w"}, 0.0);
  c.stack.launch_s = g.value("launch_us", 0.0) * 1e-6;
  double slowest_peer = 0;
  if (const json* peers = at(probe, {"gpu", "peers"}); peers && peers->is_array() && !peers->empty()) {
    slowest_peer = 1e30;
    for (const json& p : *peers)
      slowest_peer = p.is_object() && p.value("access", false) ? std::min(slowest_peer, p.value("gbs", 0.0)) : 0;
  }
  const double link = std::min(g.value("h2d_pinned_gbs", 0.0), g.value("d2h_pinned_gbs", 0.0));
  if (slowest_peer > 0) {
    for (int k = 0; k < 4; ++k) c.intra.kinds[k].bandwidth_Bps = slowest_peer * 1e9;
    if (c.nodes == 1) c.inter = c.intra;
  } else if (link > 0) {
    for (int k = 0; k < 4; ++k) {
      AlphaBeta& ab = c.intra.kinds[k];
      ab.latency_s += 20e-6;  // a device copy each way
      ab.bandwidth_Bps = std::min(ab.bandwidth_Bps, link * 1e9 / 2);
    }
    if (c.nodes == 1) c.inter = c.intra;
  }
  return c;
}

}  // namespace

}  // namespace crucible::plan
