#include "runtime/plan_run.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/file_io.h"
#include "core/json_io.h"
#include "core/stats.h"
#include "kernels/gemm.h"
#include "profile/energy.h"
#include "profile/machine.h"
#include "profile/probe_schema.h"
#include "profile/run_schema.h"
#include "runtime/train_step.h"

namespace crucible::runtime {

plan::Candidate candidate_of(const Config& cfg, int world) {
  plan::Candidate c;
  c.tp = cfg.dist.tp;
  c.pp = cfg.dist.pp;
  c.v = cfg.dist.pp_virtual;
  c.dp = int(std::max<int64_t>(1, world / std::max<int64_t>(1, int64_t(c.tp) * c.pp)));
  c.mb = cfg.train.batch_size;
  c.m = cfg.train.grad_accum;
  c.zero = cfg.dist.zero;
  c.sp = cfg.dist.sequence_parallel;
  c.schedule = cfg.dist.pp_schedule;
  c.split = cfg.dist.pp_split;
  c.recompute = cfg.train.recompute;
  c.precision = cfg.train.precision;
  c.moments = cfg.optim.moments;
  c.grad_dtype = cfg.dist.grad_dtype;
  c.fused_head = cfg.train.fused_head;
  c.bucket_mb = cfg.dist.bucket_mb;
  c.overlap = cfg.dist.overlap;
  c.reproducible = cfg.dist.reproducible;
  return c;
}

Result<plan::Cluster> local_cluster(const std::string& run_dir, const profile::LocalProbe& probe,
                                    plan::NodeKind kind) {
  for (const std::string& f : {run_dir + "/cluster.toml", std::string("cluster.toml")})
    if (std::filesystem::exists(f)) return plan::load_cluster(f);
  if (!probe.doc.is_null()) return plan::cluster_from_probe(probe.doc, probe.source, kind);
  return Status::not_found("[plan] no cluster description: run `crucible probe` (probe.json) or `crucible plan "
                           "--cluster-from-probe probe.json` (cluster.toml) in the working directory");
}

Result<plan::Cluster> local_cluster(const std::string& run_dir) {
  for (const std::string& f : {run_dir + "/cluster.toml", std::string("cluster.toml")})
    if (std::filesystem::exists(f)) return local_cluster(run_dir, profile::LocalProbe{});
  for (const std::string& f : {run_dir + "/probe.json", std::string("probe.json")}) {
    if (!std::filesystem::exists(f)) continue;
    // `plan`'s own input: a bad or foreign document is an error, not a
    // silent fallback (a run, which only consults it, passes it over).
    auto doc = read_json(f);
    if (!doc) return doc.status();
    CRUCIBLE_RETURN_IF_ERROR(profile::check_probe_document(*doc, f));
    if (Status here = profile::probe_made_here(*doc, profile::machine_identity(), 36500); !here)
      return Status::invalid("[plan] " + f + " is not this machine's: " + here.message() +
                             "; run `crucible probe` here, or plan for that machine with --cluster-from-probe " + f +
                             " and --cluster");
    return local_cluster(run_dir, profile::LocalProbe{*doc, f});
  }
  return local_cluster(run_dir, profile::LocalProbe{});
}

profile::StepGemms run_step_gemms(const Config& cfg, int world) {
  const plan::Candidate c = candidate_of(cfg, world);
  const bool bf16 = cfg.train.precision == "bf16";
  profile::StepGemms step;
  step.blocks = std::max(1, cfg.model.n_layer / std::max(1, c.pp));
  auto layout = plan::check(cfg.model, c);
  const int head_chunk = layout ? plan::part_of(cfg.model, *layout, layout->coords(0), c).head_chunk : 0;
  auto call = [](int m, int n, int k, bool ta, bool tb, bool acc, bool bf16_out) {
    return profile::GemmShape{"", m, n, k, ta, tb, acc, bf16_out};
  };
  // As nn/linear.cc calls them: y = x W (weights stored (in, out); the
  // branches' first linears write bf16, those adding into the residual f32);
  // backward dW += x^T dy into f32, then dx = dy W^T; blocks backward in
  // reverse order of their linears. The planner counts (m, n, k) forward and
  // (m, k, n), (k, n, m) backward.
  std::vector<profile::StepGemm> block_bwd;
  int linear = 0;
  for (const plan::GemmShape& g : plan::forward_gemms(cfg.model, c)) {
    const int m = int(g.m), n = int(g.n), k = int(g.k);
    if (g.block) {
      const bool residual = linear++ % 2 == 1;
      step.calls.push_back({call(m, n, k, false, false, false, bf16 && !residual), m, n, k, true, false});
      block_bwd.insert(block_bwd.begin(), {{call(k, n, m, true, false, true, false), k, n, m, true, true},
                                           {call(m, k, n, false, true, false, false), m, k, n, true, true}});
      continue;
    }
    // The tied head (nn/gpt.cc): logits (M, V) = h wte^T, in bf16 where the
    // step is; dh (M, C) = dlogits wte; dwte (V, C) += dlogits^T h. Fused,
    // all three run in forward, head_chunk rows at a time.
    const int rows = head_chunk > 0 ? std::min(head_chunk, m) : m;
    for (int r0 = 0; r0 < m; r0 += rows) {
      const int r = std::min(rows, m - r0);
      const bool bwd = head_chunk == 0;
      step.calls.push_back({call(r, n, k, false, true, false, bf16), m, n, k, false, false});
      step.calls.push_back({call(r, k, n, false, false, false, false), m, k, n, false, bwd});
      step.calls.push_back({call(n, k, r, true, false, true, false), k, n, m, false, bwd});
    }
  }
  step.calls.insert(step.calls.end(), block_bwd.begin(), block_bwd.end());
  // One block's attention on this rank: its heads' share of the channels.
  step.attention = {c.mb, cfg.model.seq_len, cfg.model.n_embd / std::max(1, c.tp), cfg.model.n_head / std::max(1, c.tp)};
  return step;
}

nlohmann::json run_prediction(const Config& cfg, int world, const Result<plan::Cluster>& cluster) {
  const plan::Candidate c = candidate_of(cfg, world);
  nlohmann::json j;
  if (cluster) {
    // The stack as this run has it: replaying a CUDA graph where its step
    // does (runtime/train_step.h graphs_apply), else kernel by kernel.
    plan::Cluster mine = *cluster;
    mine.stack.graphs = TrainStep::graphs_apply(cfg, world);
    j = plan::to_json(plan::predict(cfg.model, c, mine));
    j["cuda_graphs"] = mine.stack.graphs;
    j["cluster"] = {{"name", cluster->name}, {"source", cluster->source}};
  } else {
    auto layout = plan::check(cfg.model, c);
    plan::Prediction p;
    p.layout = c;
    if (layout) {
      const plan::LargestRank big = plan::largest_rank(cfg.model, c, *layout, !kernels::gemm_bf16_native());
      p.memory = big.estimate, p.peak_rank = big.rank;
    } else {
      p.why_not = layout.status().message();
    }
    j = plan::to_json(p);
    j["runs"] = layout.is_ok();
    j["cluster"] = nullptr;
    j["no_time_prediction"] = cluster.status().message();
  }
  return j;
}

std::string describe_prediction(const nlohmann::json& j) {
  const std::string peak = plan::format_bytes(j.value("peak_memory_bytes", uint64_t(0)));
  if (!j.contains("step_time_s"))
    return "[plan] predicted peak " + peak + " per rank; no step time: " +
           j.value("no_time_prediction", j.value("why_not", std::string("?")));
  std::string parts;
  char b[64];
  for (const auto& [k, v] : j["breakdown"].items())
    if (v.get<double>() >= 0.0005) {
      std::snprintf(b, sizeof b, "%s%s %.0f", parts.empty() ? "" : ", ", k.c_str(), v.get<double>() * 1e3);
      parts += b;
    }
  char line[512];
  std::snprintf(line, sizeof line, "[plan] predicted %.0f ms/step (%s ms), %.0f tokens/s, peak %s per rank (%s, %s)",
                j.value("step_time_s", 0.0) * 1e3, parts.c_str(), j.value("tokens_per_s", 0.0), peak.c_str(),
                j["cluster"].value("name", std::string("?")).c_str(), j["cluster"].value("source", std::string("?")).c_str());
  if (j.contains("energy_j_per_token"))
    return line + (", " + profile::format_energy_per_token(j["energy_j_per_token"].get<double>()));
  return line;
}

Result<plan::Observation> observe_run(const std::string& run_dir) {
  if (!std::filesystem::is_directory(run_dir))
    return Status::invalid("[plan] --calibrate " + run_dir + ": no such run directory");
  auto cfg = load_config(run_dir + "/config.toml");
  if (!cfg) return cfg.status();
  int world = cfg->dist.tp * cfg->dist.pp;
  if (std::filesystem::exists(run_dir + "/plan.json")) {
    auto pj = read_json(run_dir + "/plan.json");
    if (!pj) return pj.status();
    CRUCIBLE_RETURN_IF_ERROR(profile::check_plan_document(*pj, "[plan]", run_dir + "/plan.json"));
    const nlohmann::json& layout = (*pj)["layout"];
    if (layout.is_object() && layout.contains("devices") && layout["devices"].is_number_integer())
      world = layout["devices"].get<int>();
  }
  plan::Observation o;
  o.run = run_dir;
  o.model = cfg->model;
  o.layout = candidate_of(*cfg, world);
  std::ifstream in(run_dir + "/metrics.jsonl");
  if (!in) return Status::invalid("[plan] " + run_dir + " has no metrics.jsonl");
  std::vector<std::vector<double>> cols(8);
  std::vector<double> graph;
  const char* keys[] = {"step_ms", "data_wait_ms", "forward_ms", "backward_ms", "optimizer_ms", "comm_ms",
                        "tp_comm_ms", "pipeline_wait_ms"};
  int lineno = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineno;
    auto row = nlohmann::json::parse(line, nullptr, false);
    if (!row.is_object()) continue;  // a torn last line of a killed run
    // Types and ranges first (profile/run_schema.h): a step_ms of 1e308
    // would become a cluster file its reader refuses.
    CRUCIBLE_RETURN_IF_ERROR(profile::check_metrics_row(
        row, "[plan]", run_dir + "/metrics.jsonl:" + std::to_string(lineno)));
    if (row["step"].get<int64_t>() <= 2 || !row.contains("step_ms")) continue;
    // A step replayed from a CUDA graph has its device time whole
    // (graph_ms), and its phases only where the graph times them: the
    // phases' medians are over the steps that measured them.
    if (row.contains("graph_ms")) graph.push_back(row["graph_ms"].get<double>() * 1e-3);
    const bool parts = profile::row_has_parts(row);
    for (size_t k = 0; k < cols.size(); ++k)
      if (k < 2 || parts) cols[k].push_back(row.value(keys[k], 0.0) * 1e-3);
    o.measured.mem_peak = std::max(o.measured.mem_peak, uint64_t(row.value("mem_peak", 0.0)));
  }
  plan::Measured& m = o.measured;
  m.steps = int(cols[0].size());
  m.step = median(cols[0]), m.data_wait = median(cols[1]), m.forward = median(cols[2]), m.backward = median(cols[3]);
  m.optimizer = median(cols[4]), m.dp_comm = median(cols[5]), m.tp_comm = median(cols[6]);
  m.pipeline_wait = median(cols[7]), m.graph = median(graph);
  return o;
}

profile::LocalProbe predict_run(const Config& cfg, int world, const std::string& run, Device device,
                                const std::function<void(const std::string&)>& log) {
  profile::LocalProbeOptions po;
  po.candidates = {run + "/probe.json", "probe.json"};
  po.write_to = run + "/probe.json";
  po.max_age_days = cfg.run.probe_max_age_days;
  po.log = log;
  po.step = run_step_gemms(cfg, world);
  po.dtype = cfg.train.precision == "bf16" ? "bf16" : "f32";
  po.gpu = device.is_cuda() ? device.index : -1;
  const profile::LocalProbe probe = profile::local_probe(po);
  const nlohmann::json prediction = run_prediction(
      cfg, world, local_cluster(run, probe, device.is_cuda() ? plan::NodeKind::kGpu : plan::NodeKind::kCpu));
  if (Status ps = write_file_atomic(run + "/plan.json", prediction.dump(1) + "\n"); !ps)
    log("[plan] warning: " + ps.message());
  log(describe_prediction(prediction));
  return probe;
}

}  // namespace crucible::runtime
