#include "profile/probe_gpu.h"

#include <algorithm>
#include <cstdio>

#include "core/allocator.h"
#include "core/clock.h"
#include "kernels/cuda/cuda.h"
#include "kernels/device_scope.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "profile/energy.h"
#include "profile/gpu_ceiling.h"
#include "profile/nvml.h"

namespace crucible::profile {

using nlohmann::json;

namespace {

// Host<->device bandwidth, pinned and pageable, into `d`.
Status measure_host_links(int index, json& d) {
  const size_t bytes = size_t(256) << 20;
  Allocator& dev = Allocator::of(Device::cuda(index));
  Allocator* pinned_pool = Allocator::pinned();
  if (!pinned_pool) return Status::internal("[probe] gpu: no pinned memory source after use_device");
  Allocator& pinned = *pinned_pool;
  void* g = dev.allocate(bytes, "probe.gpu_link");
  void* p = pinned.allocate(bytes, "probe.gpu_link");
  void* h = Allocator::global().allocate(bytes, "probe.gpu_link", true);
  auto rate = [&](const char* key, void* dst, const void* src, bool to_device) -> Status {
    auto seconds = gpu_best_seconds(1, 3, [&] {
      return to_device ? kernels::cuda::copy_to_device(dst, src, bytes, nullptr)
                       : kernels::cuda::copy_to_host(dst, src, bytes, nullptr);
    });
    if (!seconds) return seconds.status();
    d[key] = double(bytes) / *seconds * 1e-9;
    return Status::ok();
  };
  Status s = rate("h2d_pinned_gbs", g, p, true);
  if (s) s = rate("d2h_pinned_gbs", p, g, false);
  if (s) s = rate("h2d_pageable_gbs", g, h, true);
  if (s) s = rate("d2h_pageable_gbs", h, g, false);
  dev.release(g);
  pinned.release(p);
  Allocator::global().release(h);
  return s;
}

// Microseconds per launch of a one-element kernel, back to back.
Result<double> measure_launch_us(int index) {
  Allocator& dev = Allocator::of(Device::cuda(index));
  float* x = static_cast<float*>(dev.allocate(256, "probe.gpu_launch"));
  kernels::DeviceScope on(Device::cuda(index));
  kernels::fill(x, 1, 0.0f);
  CRUCIBLE_RETURN_IF_ERROR(kernels::cuda::synchronize(nullptr));
  constexpr int kLaunches = 5000;
  const int64_t t0 = now_ns();
  for (int i = 0; i < kLaunches; ++i) kernels::fill(x, 1, float(i));
  Status s = kernels::cuda::synchronize(nullptr);
  const double us = (now_ns() - t0) * 1e-3 / kLaunches;
  dev.release(x);
  if (!s) return s;
  return us;
}

json nvml_json(const NvmlSample& s) {
  return {{"power_w", s.power_w},
          {"power_limit_w", s.power_limit_w},
          {"sm_clock_mhz", s.sm_clock_mhz},
          {"max_sm_clock_mhz", s.max_sm_clock_mhz},
          {"mem_clock_mhz", s.mem_clock_mhz},
          {"temperature_c", s.temperature_c}};
}

// bf16 GEMMs of n^3 back to back for `seconds`, NVML sampled between groups
// of calls: the clocks, power and temperature a long run settles at.
Result<json> sustained_load(int index, const NvmlDevice* nvml, EnergyMeter* meter, double seconds) {
  const int n = 8192;
  const size_t elems = size_t(n) * n;
  Allocator& pool = Allocator::of(Device::cuda(index));
  void* a = pool.allocate(elems * 2, "probe.gpu_load");
  void* b = pool.allocate(elems * 2, "probe.gpu_load");
  void* c = pool.allocate(elems * 2, "probe.gpu_load");
  kernels::DeviceScope on(Device::cuda(index));
  kernels::fill(static_cast<float*>(a), elems / 2, 1.0f);
  kernels::fill(static_cast<float*>(b), elems / 2, 1.0f);
  struct Sample {
    double t, sm_clock, temp;
    uint64_t throttle;
  };
  std::vector<Sample> samples;
  auto read_j = [&]() -> double {
    if (!meter) return -1;
    auto j = meter->joules();
    return j ? *j : -1;
  };
  const double j0 = read_j();
  Stopwatch sw;
  int64_t calls = 0;
  Status s;
  while (sw.elapsed_s() < seconds) {
    for (int i = 0; i < 16; ++i)
      kernels::gemm(DType::bf16, DType::bf16, false, false, n, n, n, a, n, b, n, c, n, false,
                    nullptr);
    calls += 16;
    if (s = kernels::cuda::synchronize(nullptr); !s) break;
    if (nvml) {
      const NvmlSample x = nvml->sample();
      samples.push_back(
          {sw.elapsed_s(), double(x.sm_clock_mhz), double(x.temperature_c), x.throttle});
    }
  }
  const double t = sw.elapsed_s();
  const double j1 = j0 >= 0 ? read_j() : -1;
  pool.release(a);
  pool.release(b);
  pool.release(c);
  if (!s) return s;
  json load = {{"seconds", t},
               {"bf16_tflops", 2.0 * double(n) * n * n * double(calls) / t * 1e-12}};
  if (j1 >= j0 && j0 >= 0) {
    load["energy_j"] = j1 - j0;
    load["mean_power_w"] = (j1 - j0) / t;
  }
  if (!samples.empty()) {
    auto mean_clock = [&](double lo, double hi) {
      double sum = 0;
      int k = 0;
      for (const Sample& x : samples)
        if (x.t >= lo && x.t < hi) sum += x.sm_clock, ++k;
      return k ? sum / k : samples.front().sm_clock;
    };
    load["first_sm_clock_mhz"] = mean_clock(0, 1);
    load["last_sm_clock_mhz"] = mean_clock(t - 1, t + 1);
    double max_temp = 0;
    uint64_t bits = 0;
    for (const Sample& x : samples) max_temp = std::max(max_temp, x.temp), bits |= x.throttle;
    load["max_temperature_c"] = max_temp;
    const std::vector<std::string> names = throttle_names(bits);
    load["throttle"] = names;
    load["throttling"] = std::any_of(names.begin(), names.end(),
                                     [](const std::string& r) { return r != "sync_boost"; });
  }
  return load;
}

Result<json> probe_device(int index, double load_s) {
  CRUCIBLE_RETURN_IF_ERROR(kernels::cuda::use_device(index));
  auto info = kernels::cuda::device_info(index);
  if (!info) return info.status();
  json d = {{"index", index},
            {"name", info->name},
            {"pci_bus_id", info->pci_bus_id},
            {"compute_capability", std::to_string(info->major) + "." + std::to_string(info->minor)},
            {"sms", info->multiprocessors},
            {"memory_bytes", info->memory_bytes}};
  auto ceiling = measure_gpu_ceiling(Device::cuda(index));
  if (!ceiling) return ceiling.status();
  d["gemm_n"] = ceiling->gemm_n;
  d["bf16_gemm_tflops"] = ceiling->bf16_gemm_tflops;
  d["f32_gemm_tflops"] = ceiling->f32_gemm_tflops;
  d["tf32_gemm_tflops"] = ceiling->tf32_gemm_tflops;
  d["copy_gbs"] = ceiling->copy_gbs;
  // A transformer step's GEMMs, as the planner times them (plan/time_model.h
  // forward_gemms): GPT-2 124M and 350M widths, 16 sequences of 1024 tokens;
  // the efficiency table of this GPU node's cluster file.
  std::vector<std::array<int64_t, 3>> shapes;
  for (const int64_t C : {768, 1024})
    for (const std::array<int64_t, 2> nk :
         {std::array<int64_t, 2>{3 * C, C}, {C, C}, {4 * C, C}, {C, 4 * C}, {50304, C}})
      shapes.push_back({16 * 1024, nk[0], nk[1]});
  auto gemms = measure_gpu_gemms(Device::cuda(index), shapes);
  if (!gemms) return gemms.status();
  json rows = json::array();
  for (const GpuGemmRow& r : *gemms)
    rows.push_back({{"m", r.m}, {"n", r.n}, {"k", r.k}, {"dtype", r.dtype}, {"tflops", r.tflops}});
  d["gemm"] = rows;
  CRUCIBLE_RETURN_IF_ERROR(measure_host_links(index, d));
  auto launch = measure_launch_us(index);
  if (!launch) return launch.status();
  d["launch_us"] = *launch;
  auto nvml = NvmlDevice::open(info->pci_bus_id);
  if (nvml)
    d["nvml"] = nvml_json(nvml->sample());
  else
    d["nvml_unavailable"] = nvml.status().message();
  auto meter = EnergyMeter::gpu(info->pci_bus_id, "cuda:" + std::to_string(index));
  auto load = sustained_load(index, nvml ? &*nvml : nullptr, meter ? &*meter : nullptr, load_s);
  if (!load) return load.status();
  d["load"] = *load;
  return d;
}

// GPU-to-GPU bandwidth for every ordered pair (from, to): 256 MiB copied,
// best of 3, on `from`'s default stream. NVLink's or PCIe P2P's rate where
// peer access is possible, the driver's staging through the host otherwise
// (`access` says which). What NCCL's rings and trees run over.
Result<json> measure_peers(int n) {
  const size_t bytes = size_t(256) << 20;
  std::vector<void*> buf(size_t(n), nullptr);
  for (int i = 0; i < n; ++i)
    buf[size_t(i)] = Allocator::of(Device::cuda(i)).allocate(bytes, "probe.gpu_peer");
  json peers = json::array();
  Status s;
  for (int from = 0; from < n && s; ++from)
    for (int to = 0; to < n && s; ++to) {
      if (from == to) continue;
      auto access = kernels::cuda::enable_peer_access(from, to);
      if (!access) {
        s = access.status();
        break;
      }
      kernels::DeviceScope on(Device::cuda(from));
      auto seconds = gpu_best_seconds(2, 3, [&] {
        return kernels::cuda::copy_peer(buf[size_t(to)], to, buf[size_t(from)], from, bytes,
                                        nullptr);
      });
      if (!seconds) {
        s = seconds.status();
        break;
      }
      peers.push_back({{"from", from},
                       {"to", to},
                       {"access", *access},
                       {"gbs", double(bytes) / *seconds * 1e-9}});
    }
  for (int i = 0; i < n; ++i) Allocator::of(Device::cuda(i)).release(buf[size_t(i)]);
  if (!s) return s;
  return peers;
}

}  // namespace

json probe_gpu(const GpuProbeOptions& opt) {
  if (!kernels::cuda::compiled())
    return {{"count", 0}, {"why", "this crucible was built without CUDA"}};
  const int n = kernels::cuda::device_count();
  if (n == 0) return {{"count", 0}, {"why", "no CUDA GPU on this machine (or no driver)"}};
  const double load_s = opt.load_s > 0 ? opt.load_s : opt.quick ? 3 : 20;
  json devices = json::array();
  for (int i = 0; i < n; ++i) {
    if (opt.only >= 0 && i != opt.only) continue;
    auto d = probe_device(i, load_s);
    devices.push_back(d ? *d : json{{"index", i}, {"error", d.status().message()}});
  }
  json out = {{"count", n}, {"devices", devices}};
  if (opt.only >= 0) {
    out["peers_why"] = "one GPU probed (cuda:" + std::to_string(opt.only) + ", a run's own)";
  } else if (n < 2) {
    out["peers_why"] = "one GPU: no peer to copy to";
  } else if (auto peers = measure_peers(n)) {
    out["peers"] = *peers;
  } else {
    out["peers_why"] = peers.status().message();
  }
  return out;
}

std::string gpu_table(const json& j) {
  if (j.value("count", 0) == 0) return "  none: " + j.value("why", std::string("?")) + "\n";
  std::string out;
  char line[512];
  for (const json& d : j["devices"]) {
    if (d.contains("error")) {
      out += "  cuda:" + std::to_string(d.value("index", -1)) + ": " +
             d["error"].get<std::string>() + "\n";
      continue;
    }
    std::snprintf(
        line, sizeof line,
        "  cuda:%d %s (%s, sm_%s, %d SMs, %.0f GiB)\n"
        "    GEMM bf16 %.0f TFLOP/s, f32 %.1f TFLOP/s (%d^3), tf32 %.0f TFLOP/s; copy %.0f GB/s\n"
        "    host->device %.1f GB/s pinned, %.1f pageable; device->host %.1f pinned, "
        "%.1f pageable; "
        "launch %.1f us\n",
        d.value("index", 0), d.value("name", "?").c_str(), d.value("pci_bus_id", "?").c_str(),
        d.value("compute_capability", "?").c_str(), d.value("sms", 0),
        d.value("memory_bytes", 0.0) / double(1 << 30), d.value("bf16_gemm_tflops", 0.0),
        d.value("f32_gemm_tflops", 0.0), d.value("gemm_n", 0), d.value("tf32_gemm_tflops", 0.0),
        d.value("copy_gbs", 0.0), d.value("h2d_pinned_gbs", 0.0), d.value("h2d_pageable_gbs", 0.0),
        d.value("d2h_pinned_gbs", 0.0), d.value("d2h_pageable_gbs", 0.0),
        d.value("launch_us", 0.0));
    out += line;
    if (d.contains("load")) {
      const json& l = d["load"];
      std::string reasons;
      for (const auto& r : l.value("throttle", json::array()))
        reasons += (reasons.empty() ? "" : ",") + r.get<std::string>();
      std::snprintf(line, sizeof line,
                    "    %.0f s of bf16 GEMMs: %.0f TFLOP/s, SM clock %.0f -> %.0f MHz, %.0f W "
                    "mean, up to %.0f C%s\n",
                    l.value("seconds", 0.0), l.value("bf16_tflops", 0.0),
                    l.value("first_sm_clock_mhz", 0.0), l.value("last_sm_clock_mhz", 0.0),
                    l.value("mean_power_w", 0.0), l.value("max_temperature_c", 0.0),
                    reasons.empty() ? "" : ("; throttle: " + reasons).c_str());
      out += line;
    }
    if (d.contains("nvml_unavailable"))
      out += "    NVML: " + d["nvml_unavailable"].get<std::string>() + "\n";
  }
  if (j.contains("peers") && !j["peers"].empty()) {
    double lo = 1e30, hi = 0;
    int direct = 0;
    for (const json& p : j["peers"]) {
      lo = std::min(lo, p.value("gbs", 0.0)), hi = std::max(hi, p.value("gbs", 0.0));
      direct += p.value("access", false) ? 1 : 0;
    }
    std::snprintf(line, sizeof line,
                  "  GPU to GPU: %.0f-%.0f GB/s over %zu pairs (%d with direct peer access)\n", lo,
                  hi, j["peers"].size(), direct);
    out += line;
  } else if (j.contains("peers_why")) {
    out += "  GPU to GPU: " + j["peers_why"].get<std::string>() + "\n";
  }
  return out;
}

}  // namespace crucible::profile
