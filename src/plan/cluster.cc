#include "plan/cluster.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace crucible::plan {

namespace {

constexpr const char* kKinds[] = {"allreduce", "allgather", "reduce_scatter", "p2p"};
constexpr const char* kClusterPrecisions[] = {"fp32", "bf16"};

// A table read key by key. only() first refuses any key the reader does
// not know, so a misspelt one is an error that names it, not a silently
// ignored default.
class Reader {
 public:
  Reader(const toml::table& t, std::string path, std::string source)
      : t_(t), path_(std::move(path)), source_(std::move(source)) {}

  Status bad(const std::string& key, const std::string& why) const {
    return Status::invalid("[plan] " + source_ + ": " + name(key) + ": " + why);
  }
  std::string name(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  bool has(const std::string& key) const { return t_.contains(key); }
  // Refuses a key not in `known` (before any value is read: a misspelt key
  // is reported as itself, not as the missing key it was meant to be).
  Status only(std::initializer_list<const char*> known) const {
    for (const auto& [k, v] : t_) {
      (void)v;
      const std::string key(k.str());
      if (std::none_of(known.begin(), known.end(), [&](const char* x) { return key == x; }))
        return bad(key, "unknown key");
    }
    return Status::ok();
  }

  // A number (integer or float) > 0 (>= 0 when zero_ok); absent: keeps *out
  // unless required.
  // max: far above any machine (1e6 GB, TFLOP/s, GB/s, us), so the
  // arithmetic on them never overflows.
  Status number(const std::string& key, double* out, bool required, bool zero_ok = false,
                double max = 1e6) {
    const toml::node* n = t_.get(key);
    if (!n) return required ? bad(key, "missing") : Status::ok();
    std::optional<double> v = n->is_integer() ? std::optional<double>(double(*n->value<int64_t>())) : n->value<double>();
    if (!v || !(n->is_integer() || n->is_floating_point())) return bad(key, "expected a number");
    if (!std::isfinite(*v) || *v < 0 || (*v == 0 && !zero_ok) || *v > max)
      return bad(key, fmt(*v) + " is out of range (" + (zero_ok ? "[0, " : "(0, ") + fmt(max) + "])");
    *out = *v;
    return Status::ok();
  }
  Status integer(const std::string& key, int* out, bool required) {
    const toml::node* n = t_.get(key);
    if (!n) return required ? bad(key, "missing") : Status::ok();
    if (!n->is_integer() || *n->value<int64_t>() < 1 || *n->value<int64_t>() > (1 << 24))
      return bad(key, "expected an integer in [1, 16777216]");
    *out = int(*n->value<int64_t>());
    return Status::ok();
  }
  Status boolean(const std::string& key, bool* out) {
    const toml::node* n = t_.get(key);
    if (!n) return Status::ok();
    if (!n->is_boolean()) return bad(key, "expected true or false");
    *out = *n->value<bool>();
    return Status::ok();
  }
  Status string(const std::string& key, std::string* out, bool required) {
    const toml::node* n = t_.get(key);
    if (!n) return required ? bad(key, "missing") : Status::ok();
    if (!n->is_string()) return bad(key, "expected a string");
    *out = *n->value<std::string>();
    return Status::ok();
  }
  Result<Reader> table(const std::string& key, bool required) {
    static const toml::table empty;
    const toml::node* n = t_.get(key);
    if (!n) {
      if (required) return bad(key, "missing");
      return Reader(empty, name(key), source_);
    }
    if (!n->is_table()) return bad(key, "expected a table");
    return Reader(*n->as_table(), name(key), source_);
  }
  const toml::node* raw(const std::string& key) const {
    return t_.get(key);
  }
  static std::string fmt(double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", x);
    return b;
  }

 private:
  const toml::table& t_;
  std::string path_, source_;
};

Status read_link(Reader& r, Link* link) {
  CRUCIBLE_RETURN_IF_ERROR(r.only({"latency_us", "bandwidth_gbs", "allreduce", "allgather", "reduce_scatter", "p2p"}));
  double lat_us = -1, bw = -1;
  CRUCIBLE_RETURN_IF_ERROR(r.number("latency_us", &lat_us, true, true));
  CRUCIBLE_RETURN_IF_ERROR(r.number("bandwidth_gbs", &bw, true));
  for (int k = 0; k < 4; ++k) {
    auto sub = r.table(kKinds[k], false);
    if (!sub) return sub.status();
    double l = lat_us, b = bw;
    CRUCIBLE_RETURN_IF_ERROR(sub->only({"latency_us", "bandwidth_gbs"}));
    CRUCIBLE_RETURN_IF_ERROR(sub->number("latency_us", &l, false, true));
    CRUCIBLE_RETURN_IF_ERROR(sub->number("bandwidth_gbs", &b, false));
    link->kinds[k] = {l * 1e-6, b * 1e9};
  }
  return Status::ok();
}

Status read_curve(Reader& r, const std::string& key, std::vector<Device::GemmPoint>* out) {
  const toml::node* n = r.raw(key);
  if (!n) return r.bad(key, "missing");
  const toml::array* a = n->as_array();
  if (!a || a->empty()) return r.bad(key, "expected a non-empty array of [m, n, k, efficiency]");
  out->clear();
  for (const toml::node& e : *a) {
    const toml::array* p = e.as_array();
    if (!p || p->size() != 4) return r.bad(key, "expected [m, n, k, efficiency] entries");
    double v[4];
    for (size_t i = 0; i < 4; ++i) {
      const toml::node* x = p->get(i);
      if (x->is_integer()) v[i] = double(*x->value<int64_t>());
      else if (x->is_floating_point()) v[i] = *x->value<double>();
      else return r.bad(key, "expected [m, n, k, efficiency] entries of numbers");
    }
    if (!(v[0] >= 1 && v[1] >= 1 && v[2] >= 1) || !(v[3] > 0 && v[3] <= 1))
      return r.bad(key, "[" + Reader::fmt(v[0]) + ", " + Reader::fmt(v[1]) + ", " + Reader::fmt(v[2]) + ", " +
                            Reader::fmt(v[3]) + "]: m, n, k must be >= 1 and the efficiency in (0, 1]");
    out->push_back({v[0], v[1], v[2], v[3]});
  }
  return Status::ok();
}

}  // namespace

const char* collective_name(Collective k) { return kKinds[int(k)]; }

double Link::time(Collective kind, double bytes, int group) const {
  if (bytes <= 0 || (group <= 1 && kind != Collective::kP2p)) return 0;
  const AlphaBeta& ab = kinds[int(kind)];
  const double n = group;
  switch (kind) {
    case Collective::kAllreduce:
      return 2 * (n - 1) * ab.latency_s + 2 * (n - 1) / n * bytes / ab.bandwidth_Bps;
    case Collective::kAllgather:
    case Collective::kReduceScatter:
      return (n - 1) * ab.latency_s + (n - 1) / n * bytes / ab.bandwidth_Bps;
    case Collective::kP2p:
      return ab.latency_s + bytes / ab.bandwidth_Bps;
  }
  return 0;
}

double Device::gemm_efficiency_at(int precision, double m, double n, double k) const {
  const auto& pts = gemm_efficiency[precision];
  if (pts.empty()) return 1;
  double wsum = 0, esum = 0;
  for (const GemmPoint& p : pts) {
    const double dm = std::log(m / p.m), dn = std::log(n / p.n), dk = std::log(k / p.k);
    const double d2 = dm * dm + dn * dn + dk * dk;
    if (d2 < 1e-12) return p.efficiency;
    wsum += 1 / (d2 * d2), esum += p.efficiency / (d2 * d2);
  }
  return esum / wsum;
}

Result<Cluster> parse_cluster(const std::string& text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << "[plan] " << source << ":" << e.source().begin.line << ": " << e.description();
    return Status::invalid(msg.str());
  }
  Cluster c;
  c.source = source;
  Reader r(root, "", source);
  CRUCIBLE_RETURN_IF_ERROR(r.only({"name", "nodes", "devices_per_node", "devices_per_nic", "shared_node",
                                   "step_overhead_ms", "data_wait_ms", "device", "links", "stack"}));
  CRUCIBLE_RETURN_IF_ERROR(r.string("name", &c.name, true));
  CRUCIBLE_RETURN_IF_ERROR(r.integer("nodes", &c.nodes, true));
  CRUCIBLE_RETURN_IF_ERROR(r.integer("devices_per_node", &c.devices_per_node, true));
  CRUCIBLE_RETURN_IF_ERROR(r.integer("devices_per_nic", &c.devices_per_nic, false));
  CRUCIBLE_RETURN_IF_ERROR(r.boolean("shared_node", &c.shared_node));
  double ms = 0;
  CRUCIBLE_RETURN_IF_ERROR(r.number("step_overhead_ms", &ms, false, true));
  c.step_overhead_s = ms * 1e-3;
  ms = 0;
  CRUCIBLE_RETURN_IF_ERROR(r.number("data_wait_ms", &ms, false, true));
  c.data_wait_s = ms * 1e-3;

  auto dev = r.table("device", true);
  if (!dev) return dev.status();
  Device& d = c.device;
  CRUCIBLE_RETURN_IF_ERROR(
      dev->only({"name", "memory_gb", "memory_bandwidth_gbs", "memory_efficiency", "peak_tflops",
                 "attention_efficiency", "gemm_efficiency", "power_w", "bf16_widened"}));
  double gb = 0, gbs = 0;
  CRUCIBLE_RETURN_IF_ERROR(dev->string("name", &d.name, true));
  CRUCIBLE_RETURN_IF_ERROR(dev->number("memory_gb", &gb, true));
  CRUCIBLE_RETURN_IF_ERROR(dev->number("memory_bandwidth_gbs", &gbs, true));
  // Up to 2: streaming kernels may beat STREAM triad's byte count (which
  // counts no write-allocate traffic) after calibration.
  CRUCIBLE_RETURN_IF_ERROR(dev->number("memory_efficiency", &d.memory_efficiency, false, false, 2));
  CRUCIBLE_RETURN_IF_ERROR(dev->number("power_w", &d.power_w, false, true, 1e5));
  CRUCIBLE_RETURN_IF_ERROR(dev->boolean("bf16_widened", &d.bf16_widened));
  d.memory_bytes = gb * 1e9;
  d.memory_bandwidth_Bps = gbs * 1e9;
  auto peak = dev->table("peak_tflops", true);
  if (!peak) return peak.status();
  auto att = dev->table("attention_efficiency", true);
  if (!att) return att.status();
  auto eff = dev->table("gemm_efficiency", true);
  if (!eff) return eff.status();
  for (Reader* t : {&*peak, &*att, &*eff}) CRUCIBLE_RETURN_IF_ERROR(t->only({"fp32", "bf16"}));
  for (int p = 0; p < 2; ++p) {
    double tf = 0;
    CRUCIBLE_RETURN_IF_ERROR(peak->number(kClusterPrecisions[p], &tf, true));
    d.peak_flops[p] = tf * 1e12;
    CRUCIBLE_RETURN_IF_ERROR(att->number(kClusterPrecisions[p], &d.attention_efficiency[p], true, false, 1));
    CRUCIBLE_RETURN_IF_ERROR(read_curve(*eff, kClusterPrecisions[p], &d.gemm_efficiency[p]));
  }

  auto links = r.table("links", true);
  if (!links) return links.status();
  CRUCIBLE_RETURN_IF_ERROR(links->only({"intra", "inter"}));
  auto intra = links->table("intra", true);
  if (!intra) return intra.status();
  CRUCIBLE_RETURN_IF_ERROR(read_link(*intra, &c.intra));
  if (c.devices() > (1 << 24)) return r.bad("nodes", "nodes x devices_per_node is more than 16777216 devices");
  if (c.devices_per_nic > c.devices_per_node)
    return r.bad("devices_per_nic", std::to_string(c.devices_per_nic) + " is more than devices_per_node = " +
                                        std::to_string(c.devices_per_node));
  if (c.nodes > 1 || links->has("inter")) {
    auto inter = links->table("inter", true);
    if (!inter) return inter.status();
    CRUCIBLE_RETURN_IF_ERROR(read_link(*inter, &c.inter));
  } else {
    c.inter = c.intra;
  }
  auto stack = r.table("stack", false);
  if (!stack) return stack.status();
  CRUCIBLE_RETURN_IF_ERROR(stack->only({"tp_comm", "tp_overlap", "launch_us", "cuda_graphs"}));
  std::string tp_comm = "f32";
  CRUCIBLE_RETURN_IF_ERROR(stack->string("tp_comm", &tp_comm, false));
  if (tp_comm != "f32" && tp_comm != "working")
    return stack->bad("tp_comm", "'" + tp_comm + "' is not f32 or working");
  c.stack.tp_comm_working = tp_comm == "working";
  CRUCIBLE_RETURN_IF_ERROR(stack->number("tp_overlap", &c.stack.tp_overlap, false, true, 1));
  double us = 0;
  CRUCIBLE_RETURN_IF_ERROR(stack->number("launch_us", &us, false, true, 1e4));
  c.stack.launch_s = us * 1e-6;
  CRUCIBLE_RETURN_IF_ERROR(stack->boolean("cuda_graphs", &c.stack.graphs));
  return c;
}

Result<Cluster> load_cluster(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return Status::invalid("[plan] the cluster file " + path +
                           (std::filesystem::exists(path, ec) ? " is not a regular file" : " does not exist"));
  std::ifstream in(path);
  if (!in) return Status::invalid("[plan] cannot read the cluster file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_cluster(ss.str(), path);
}

namespace {

// A TOML basic string: quotes, backslashes and control characters escaped,
// so any name (a host's, a CPU model's) reads back as itself.
std::string toml_string(const std::string& v) {
  std::string out = "\"";
  for (unsigned char ch : v) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += char(ch);
    } else if (ch < 0x20 || ch == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", ch);
      out += b;
    } else {
      out += char(ch);
    }
  }
  return out + "\"";
}

}  // namespace

Status check_cluster(const Cluster& c) {
  return parse_cluster(cluster_toml(c, ""), c.source).status();
}

std::string cluster_toml(const Cluster& c, const std::string& header) {
  std::ostringstream o;
  auto g = [](double x) {
    char b[40];
    std::snprintf(b, sizeof b, "%.6g", x);
    std::string s = b;
    return s;
  };
  o << header;
  o << "name = " << toml_string(c.name) << "\n"
    << "nodes = " << c.nodes << "\ndevices_per_node = " << c.devices_per_node << "\n"
    << "devices_per_nic = " << c.devices_per_nic
    << "\nshared_node = " << (c.shared_node ? "true" : "false") << "\n"
    << "step_overhead_ms = " << g(c.step_overhead_s * 1e3)
    << "\ndata_wait_ms = " << g(c.data_wait_s * 1e3) << "\n\n"
    << "[device]\nname = " << toml_string(c.device.name) << "\n"
    << "memory_gb = " << g(c.device.memory_bytes / 1e9) << "\n"
    << "memory_bandwidth_gbs = " << g(c.device.memory_bandwidth_Bps / 1e9) << "\n"
    << "memory_efficiency = " << g(c.device.memory_efficiency) << "\n"
    << "power_w = " << g(c.device.power_w) << "\n"
    << "bf16_widened = " << (c.device.bf16_widened ? "true" : "false") << "\n"
    << "peak_tflops = { fp32 = " << g(c.device.peak_flops[0] / 1e12)
    << ", bf16 = " << g(c.device.peak_flops[1] / 1e12) << " }\n"
    << "attention_efficiency = { fp32 = " << g(c.device.attention_efficiency[0])
    << ", bf16 = " << g(c.device.attention_efficiency[1]) << " }\n\n"
    << "[device.gemm_efficiency]  # [m, n, k, fraction of peak]\n";
  for (int p = 0; p < 2; ++p) {
    o << kClusterPrecisions[p] << " = [";
    for (size_t i = 0; i < c.device.gemm_efficiency[p].size(); ++i)
      o << (i ? ",\n  " : "\n  ") << "[" << g(c.device.gemm_efficiency[p][i].m) << ", "
        << g(c.device.gemm_efficiency[p][i].n) << ", " << g(c.device.gemm_efficiency[p][i].k) << ", "
        << g(c.device.gemm_efficiency[p][i].efficiency) << "]";
    o << "\n]\n";
  }
  auto link = [&](const char* name, const Link& l) {
    const AlphaBeta& base = l.kinds[0];
    o << "\n[links." << name << "]\nlatency_us = " << g(base.latency_s * 1e6)
      << "\nbandwidth_gbs = " << g(base.bandwidth_Bps / 1e9) << "\n";
    for (int k = 1; k < 4; ++k)
      if (l.kinds[k].latency_s != base.latency_s || l.kinds[k].bandwidth_Bps != base.bandwidth_Bps)
        o << "[links." << name << "." << kKinds[k] << "]\nlatency_us = " << g(l.kinds[k].latency_s * 1e6)
          << "\nbandwidth_gbs = " << g(l.kinds[k].bandwidth_Bps / 1e9) << "\n";
  };
  link("intra", c.intra);
  if (c.nodes > 1) link("inter", c.inter);
  o << "\n[stack]  # what the training code does (docs/plan.md)\ntp_comm = \""
    << (c.stack.tp_comm_working ? "working" : "f32") << "\"\ntp_overlap = " << g(c.stack.tp_overlap)
    << "\nlaunch_us = " << g(c.stack.launch_s * 1e6) << "\ncuda_graphs = " << (c.stack.graphs ? "true" : "false")
    << "\n";
  return o.str();
}

}  // namespace crucible::plan
