#include "profile/local_probe.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <thread>

#include "core/file_io.h"
#include "core/json_io.h"
#include "core/threads.h"
#include "kernels/gemm.h"
#include "profile/gpu_ceiling.h"
#include "profile/load_watch.h"
#include "profile/machine.h"
#include "profile/probe.h"
#include "profile/probe_compute.h"
#include "profile/probe_gpu.h"
#include "profile/probe_schema.h"
#include "profile/probe_step_gemms.h"

namespace crucible::profile {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
// Whether other processes leave this machine's CPUs to a probe now: their
// share over a quarter of a second below load_watch.h's threshold.
bool quiet_now() {
  LoadWatch watch;
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  const double share = watch.others_share();
  return std::isfinite(share) && share < kBusyShare;
}
}  // namespace

std::string machine_cache_dir() {
  if (const char* d = std::getenv("CRUCIBLE_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/crucible";
  if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/crucible";
  return "";
}

// Keyed by the thread count too: the compute section's "all threads" rows
// (and the step's GEMMs, timed on all of them) are a run's only at its own
// count, and a one-thread test run's figures are half a two-thread job's.
std::string machine_cache_file() {
  const std::string dir = machine_cache_dir();
  if (dir.empty()) return "";
  return dir + "/probe-" + machine_identity().value("fingerprint", "") + "-t" +
         std::to_string(num_threads()) + ".json";
}

double gemm_ceiling(const json& probe, int threads, const std::string& dtype) {
  double best = 0;
  if (!probe.is_object() || !probe.contains("compute") || !probe["compute"].is_object()) return 0;
  const json& gemms = probe["compute"].value("gemm", json::array());
  if (!gemms.is_array()) return 0;
  for (const json& g : gemms)
    if (g.is_object() && g.value("dtype", "") == dtype && g.value("threads", 0) == threads &&
        g.value("valid", false) && g.contains("gflops") && g["gflops"].is_number())
      best = std::max(best, g["gflops"].get<double>());
  return best;
}

namespace {

// The sections the planner reads, quick and bounded.
json measure_here() {
  ProbeOptions o;
  o.quick = true;
  o.sections = {"compute", "memory", "topology"};
  o.compute_budget_s = 3;
  o.memory_budget_s = 2;
  json doc = probe_header(true);
  probe_local_sections(o, doc);
  return doc;
}

// The run's attention row in holder["attention"] (profile/probe_step_gemms.h;
// a GPU's: its entry of the gpu section): measured when the rows lack one of
// its shape and precision (`threads`: the CPU rows'; 0 on a GPU, whose rows
// carry none), and kept last either way (the planner reads the last:
// plan/cluster_probe.cc). The number measured, or the measurement's error.
Result<int> attention_row_last(json& holder, const StepAttention& a, const std::string& dtype,
                               int threads, const std::function<Result<json>()>& measure) {
  if (a.B <= 0) return 0;
  if (!holder.contains("attention") || !holder["attention"].is_array())
    holder["attention"] = json::array();
  json kept = json::array(), mine;
  for (const json& r : holder["attention"]) {
    const bool same = r.is_object() && r.value("B", 0) == a.B && r.value("T", 0) == a.T &&
                      r.value("C", 0) == a.C && r.value("NH", 0) == a.NH &&
                      r.value("dtype", "") == dtype && r.value("threads", 0) == threads;
    if (same)
      mine = r;
    else
      kept.push_back(r);
  }
  const int measured = mine.is_null() ? 1 : 0;
  if (mine.is_null()) {
    auto row = measure();
    if (!row) return row.status();
    mine = std::move(*row);
  }
  kept.push_back(std::move(mine));
  holder["attention"] = std::move(kept);
  return measured;
}

// Measures the run's step GEMMs (profile/probe_step_gemms.h) on all
// threads in `dtype` where the document lacks an in-step row for one of its
// planner shapes; the rows replace those of the same shapes. The number of
// rows measured.
int top_up(json& doc, const StepGemms& step, const std::string& dtype) {
  if (step.calls.empty() || !doc.contains("compute") || !doc["compute"].is_object() ||
      !doc["compute"].contains("peak"))
    return 0;
  json& compute = doc["compute"];
  const json& peak = compute["peak"];
  const int threads = peak.value("threads_all", 0);
  const bool bf16 = dtype == "bf16";
  const double ceiling = peak.value(bf16 ? "bf16_peak_gflops_all" : "derived_gflops_all", 0.0);
  if (threads < 1 || !(ceiling > 0) || !compute["gemm"].is_array()) return 0;
  auto same = [&](const json& g, int m, int n, int k) {
    return g.is_object() && g.value("m", 0) == m && g.value("n", 0) == n && g.value("k", 0) == k &&
           g.value("dtype", "") == dtype && g.value("threads", 0) == threads &&
           gemm_row_is_in_step(g);
  };
  int measured =
      *attention_row_last(compute, step.attention, dtype, threads, [&]() -> Result<json> {
        return measure_step_attention(step.attention, bf16, threads, 0.3, ceiling);
      });
  bool missing = false;
  for (const StepGemm& c : step.calls)
    missing |= std::none_of(compute["gemm"].begin(), compute["gemm"].end(),
                            [&](const json& g) { return same(g, c.m, c.n, c.k); });
  if (!missing) return measured;
  const std::vector<json> rows = measure_step_gemms(step, bf16, threads, 0.5, ceiling);
  json kept = json::array();
  for (const json& g : compute["gemm"])
    if (std::none_of(rows.begin(), rows.end(), [&](const json& r) {
          return same(g, r["m"].get<int>(), r["n"].get<int>(), r["k"].get<int>());
        }))
      kept.push_back(g);
  for (const json& r : rows) {
    compute["valid"] = compute.value("valid", true) && r.value("valid", false);
    kept.push_back(r);
  }
  compute["gemm"] = std::move(kept);
  return measured + int(rows.size());
}

// ---- a GPU run's section (the class comment) ----

// The entry of gpu.devices for GPU `index` that measured it (no error), or null.
json* gpu_entry(json& doc, int index) {
  if (!doc.contains("gpu") || !doc["gpu"].is_object() || !doc["gpu"].contains("devices") ||
      !doc["gpu"]["devices"].is_array())
    return nullptr;
  for (json& d : doc["gpu"]["devices"])
    if (d.is_object() && d.value("index", -1) == index && !d.contains("error") &&
        d.value("bf16_gemm_tflops", 0.0) > 0)
      return &d;
  return nullptr;
}

// GPU `index` measured into doc's gpu section (replacing what it said of that
// GPU); an error when the GPU cannot be measured.
Status measure_gpu_into(json& doc, int index) {
  GpuProbeOptions o;
  o.quick = true;
  o.only = index;
  const json g = probe_gpu(o);
  const json* d = g.contains("devices") && !g["devices"].empty() ? &g["devices"][0] : nullptr;
  if (!d || d->contains("error"))
    return Status::invalid(
        "[probe] cuda:" + std::to_string(index) + ": " +
        (d ? d->value("error", std::string("?")) : g.value("why", std::string("not measured"))));
  if (!doc.contains("gpu") || !doc["gpu"].is_object() || !doc["gpu"].contains("devices")) {
    doc["gpu"] = g;
    return Status::ok();
  }
  json kept = json::array();
  for (const json& e : doc["gpu"]["devices"])
    if (!e.is_object() || e.value("index", -1) != index) kept.push_back(e);
  kept.push_back(*d);
  doc["gpu"]["devices"] = std::move(kept);
  doc["gpu"]["count"] = g["count"];
  return Status::ok();
}

// The run's GEMM shapes and attention timed on GPU `index` where its entry
// lacks them; the number measured.
Result<int> top_up_gpu(json& dev, int index, const StepGemms& step, const std::string& dtype) {
  if (!dev.contains("gemm") || !dev["gemm"].is_array()) dev["gemm"] = json::array();
  std::vector<std::array<int64_t, 3>> missing;
  for (const StepGemm& c : step.calls) {
    const std::array<int64_t, 3> s = {c.m, c.n, c.k};
    auto same = [&](const json& r) {
      return r.is_object() && r.value("m", 0) == s[0] && r.value("n", 0) == s[1] &&
             r.value("k", 0) == s[2] && r.value("dtype", "") == dtype;
    };
    if (std::none_of(dev["gemm"].begin(), dev["gemm"].end(), same) &&
        std::find(missing.begin(), missing.end(), s) == missing.end())
      missing.push_back(s);
  }
  int measured = 0;
  if (!missing.empty()) {
    auto rows = measure_gpu_gemms(Device::cuda(index), missing, {dtype});
    if (!rows) return rows.status();
    for (const GpuGemmRow& r : *rows)
      if (r.dtype == dtype) {
        dev["gemm"].push_back({{"m", r.m},
                               {"n", r.n},
                               {"k", r.k},
                               {"dtype", r.dtype},
                               {"tflops", r.tflops},
                               {"form", json::array({"in_step"})}});
        ++measured;
      }
  }
  const StepAttention& a = step.attention;
  auto attention = attention_row_last(dev, a, dtype, 0, [&]() -> Result<json> {
    auto tflops = measure_gpu_attention(Device::cuda(index), a.B, a.T, a.C, a.NH, dtype == "bf16");
    if (!tflops) return tflops.status();
    return json{{"B", a.B},   {"T", a.T},       {"C", a.C},
                {"NH", a.NH}, {"dtype", dtype}, {"tflops", *tflops}};
  });
  if (!attention) return attention.status();
  measured += *attention;
  return measured;
}

// The run's GPU first in gpu.devices (a GPU node's cluster file is made from
// the first entry).
json run_gpu_first(json doc, int index) {
  json& devs = doc["gpu"]["devices"];
  std::stable_partition(devs.begin(), devs.end(), [&](const json& d) {
    return d.is_object() && d.value("index", -1) == index;
  });
  return doc;
}

}  // namespace

LocalProbe local_probe(const LocalProbeOptions& opt) {
  auto log = [&](const std::string& m) {
    if (opt.log) opt.log(m);
  };
  const bool gpu = opt.gpu >= 0;
  const json here = machine_identity();
  const std::string cache_dir = opt.use_cache ? machine_cache_dir() : "";
  const std::string cached = opt.use_cache ? machine_cache_file() : "";
  auto save_cache = [&](const json& doc) {
    if (cached.empty()) return;
    std::error_code ec;
    fs::create_directories(cache_dir, ec);
    if (Status s = write_file_atomic(cached, doc.dump(1) + "\n"); !s)
      log("[probe] warning: " + s.message());
  };
  auto keep = [&](const json& doc, const std::string& from) {
    std::error_code ec1, ec2;
    if (opt.write_to.empty() || (!from.empty() && fs::weakly_canonical(from, ec1) ==
                                                      fs::weakly_canonical(opt.write_to, ec2)))
      return;
    if (Status s = write_file_atomic(opt.write_to, doc.dump(1) + "\n"); !s)
      log("[probe] warning: " + s.message());
  };
  // A document's sections that other processes' load made unreliable
  // (load_watch.h), with the others' share of the CPUs meanwhile, as
  // "compute 51%, memory 44%"; empty: none.
  auto unreliable = [](const json& doc) {
    std::string names;
    if (!doc.contains("load") || !doc["load"].is_object()) return names;
    for (const auto& [name, l] : doc["load"].items())
      if (l.is_object() && !l.value("reliable", true) && l.contains("others_share") &&
          l["others_share"].is_number())
        names += (names.empty() ? "" : ", ") + name + " " +
                 std::to_string(int(100 * l["others_share"].get<double>())) + "%";
    return names;
  };
  auto warn_unreliable = [&](const json& doc, const std::string& what) {
    if (const std::string names = unreliable(doc); !names.empty())
      log("[probe] " + what + ": measured while other processes held the CPUs (" + names +
          "): its figures (and the prediction) are unreliable");
  };
  // The quick probe of this machine's CPU (measure_here), its unreliable
  // sections named.
  auto measure_cpu = [&] {
    log("[probe] measuring this machine (quick probe: compute, memory, topology; a few seconds)");
    json doc = measure_here();
    warn_unreliable(doc, "measured now");
    return doc;
  };
  // What the run's device needs of a document: the CPU's sections and its
  // step's GEMMs on the CPU, or its GPU's section and its step on the GPU.
  // Measures what is missing; the number of figures measured, or an error
  // when the GPU cannot be measured.
  auto complete = [&](json& doc) -> Result<int> {
    if (!gpu) {
      int added = 0;
      if (!doc.contains("compute")) {  // a GPU run's document: the CPU's sections join it
        const json cpu = measure_cpu();
        for (const char* k : {"compute", "memory", "topology", "load"})
          if (cpu.contains(k)) doc[k] = cpu[k];
        ++added;
      }
      return added + top_up(doc, opt.step, opt.dtype);
    }
    int added = 0;
    json* dev = gpu_entry(doc, opt.gpu);
    if (!dev) {
      log("[probe] measuring cuda:" + std::to_string(opt.gpu) +
          " (quick: GEMM and copy ceilings, host links, launch cost, 3 s of load; about ten "
          "seconds)");
      CRUCIBLE_RETURN_IF_ERROR(measure_gpu_into(doc, opt.gpu));
      dev = gpu_entry(doc, opt.gpu);
      if (!dev)
        return Status::internal("[probe] cuda:" + std::to_string(opt.gpu) +
                                " measured but not recorded");
      ++added;
    }
    auto more = top_up_gpu(*dev, opt.gpu, opt.step, opt.dtype);
    if (!more) return more.status();
    return added + *more;
  };
  std::vector<std::string> files = opt.candidates;
  if (!cached.empty()) files.push_back(cached);
  for (const std::string& f : files) {
    std::error_code ec;
    if (!fs::exists(f, ec)) continue;
    auto doc = read_json(f);
    // A file the run only consults: a bad or foreign one is named and passed over.
    Status bad = !doc ? doc.status() : check_probe_document(*doc, f);
    if (!bad) {
      log(bad.message() + "; not used");
      continue;
    }
    if (Status why = probe_made_here(*doc, here, opt.max_age_days); !why) {
      log("[probe] " + f + " not used: " + why.message());
      continue;
    }
    // The machine cache's figures, measured while other processes held the
    // CPUs (a build, a test suite), would stand for this machine's speed in
    // every later run: where the machine is quiet now, it is measured again
    // and the cache replaced. A file the user or the run keeps is theirs.
    if (const std::string busy = unreliable(*doc);
        !gpu && f == cached && opt.measure && !busy.empty() && quiet_now()) {
      log("[probe] " + f + " not used: measured while other processes held the CPUs (" + busy +
          "), and the machine is quiet now");
      continue;
    }
    if (!gpu) warn_unreliable(*doc, f);
    // Its bf16 GEMMs ran the path this crucible would take (a build that
    // decides bf16 natively or widened otherwise measured other kernels).
    if (const json* c = doc->contains("compute") ? &(*doc)["compute"] : nullptr;
        !gpu && c && c->contains("bf16_native") && (*c)["bf16_native"].is_boolean() &&
        (*c)["bf16_native"].get<bool>() != kernels::gemm_bf16_native()) {
      log("[probe] " + f + " not used: its bf16 GEMMs ran " +
          ((*c)["bf16_native"].get<bool>() ? "natively" : "widened to f32") +
          ", this crucible's run " + (kernels::gemm_bf16_native() ? "natively" : "widened to f32"));
      continue;
    }
    // What the run measures itself where the document lacks it: the cache
    // learns it; a file the user made is left as it is (the run keeps its
    // copy).
    auto added = complete(*doc);
    if (!added) {
      log(added.status().message() + "; no prediction");
      return {json(), ""};
    }
    if (*added > 0) {
      log("[probe] measured what this run's step needs (" + std::to_string(*added) +
          " figures), which " + f + " lacked");
      if (f == cached) save_cache(*doc);
    }
    const json used = gpu ? run_gpu_first(*doc, opt.gpu) : *doc;
    keep(used, *added > 0 || gpu ? "" : f);
    return {used, f};
  }
  if (!opt.measure) return {json(), ""};
  json doc = gpu ? probe_header(true) : measure_cpu();
  if (auto added = complete(doc); !added) {
    log(added.status().message() + "; no prediction");
    return {json(), ""};
  }
  save_cache(doc);
  const json used = gpu ? run_gpu_first(doc, opt.gpu) : doc;
  keep(used, "");
  return {used, "measured now"};
}

}  // namespace crucible::profile
