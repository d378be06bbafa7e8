// `crucible plan`: the predicted memory and step time of parallel layouts,
// before anything is launched (docs/plan.md).
//   crucible plan [CONFIG] --cluster FILE --devices N --global-batch B [--top K] [--json]
//   crucible plan [CONFIG] ... --layout "tp=8,pp=2"        these fields fixed, the rest searched
//   crucible plan [CONFIG] ... --layout "tp=8,pp=2,v=1,mb=1,...,fused_head=false"   every field: evaluated
//   crucible plan --cluster-from-probe probe.json [-o cluster.toml]    this machine's file
//   crucible plan --calibrate RUN... [--cluster FILE] [-o FILE]         refit from finished runs
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "plan/calibrate.h"
#include "plan/search.h"
#include "runtime/config.h"
#include "runtime/plan_run.h"

namespace crucible::cli {

namespace {

struct PlanOptions {
  std::string config, cluster, layout, from_probe, output;
  std::vector<std::string> overrides, calibrate;
  int devices = 0, top = 5;
  int64_t global_batch = 0;
  bool json = false, has_layout = false;
};

[[noreturn]] void fail(const Status& s) { throw ExitError(exit_code(s), s.message()); }

std::string ms(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", s * 1e3);
  return b;
}

// One line of the table: what matters to choose, then where the time goes.
std::string row(const plan::Prediction& p) {
  const plan::Breakdown& b = p.breakdown;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%-78s %9s ms %11.0f tok/s  MFU %5.1f%%  %9s/device  (fwd %s, bwd %s, tp %s, bubble %s, dp %s, "
                "opt %s)",
                p.layout.describe().c_str(), ms(p.step_time_s).c_str(), p.tokens_per_s, 100 * p.mfu,
                plan::format_bytes(p.memory.allocator_bytes()).c_str(), ms(b.forward).c_str(),
                ms(b.backward).c_str(), ms(b.tp_comm).c_str(), ms(b.bubble + b.pp_comm).c_str(),
                ms(b.dp_comm).c_str(), ms(b.optimizer).c_str());
  return buf;
}

plan::Cluster cluster_for(const PlanOptions& o) {
  auto c = o.cluster.empty() ? runtime::local_cluster(".") : plan::load_cluster(o.cluster);
  if (!c) fail(c.status().code() == Code::kNotFound ? Status::invalid(c.status().message() + " (or pass --cluster FILE)")
                                                     : c.status());
  return *c;
}

// -o, checked before any work (core/output_path.h), so a bad -o wastes nothing.
void check_output(const std::string& path) {
  Status s = check_output_path(path, "[plan] -o");
  if (!s) fail(s);
}

// A cluster file is written only when it reads back (plan::parse_cluster):
// a writer never leaves a file its own reader refuses.
void write_out(const std::string& path, const std::string& text, const std::string& what) {
  if (auto back = plan::parse_cluster(text, path); !back)
    fail(Status::invalid("[plan] not writing " + path + ": the " + what +
                         " is outside the cluster file's bounds (" + back.status().message() +
                         ")"));
  Status s = write_file_atomic(path, text);
  if (!s) fail(s);
  std::fprintf(stderr, "[plan] %s -> %s\n", what.c_str(), path.c_str());
}

// The model as the plan's header names it: its config file's name, or for
// the embedded default its size ("5.3M-parameter GPT").
std::string model_name(const std::string& config_path, const nn::GPTConfig& m) {
  if (!config_path.empty()) return std::filesystem::path(config_path).stem().string();
  const double n = double(nn::GPT::flat_params(m));
  const char* unit = "";
  double v = n;
  for (const auto& [scale, u] : {std::pair{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "K"}})
    if (n >= scale) {
      v = n / scale, unit = u;
      break;
    }
  char b[48];
  std::snprintf(b, sizeof b, "%.*f%s-parameter GPT", v < 10 && *unit ? 1 : 0, v, unit);
  return b;
}

// The fields that make a --layout one layout to evaluate (dp and m follow
// from --devices and --global-batch); with any left out it is a search.
const std::vector<const char*> kLayoutFields = {
    "tp", "pp", "v", "mb", "zero", "recompute", "sp", "schedule", "precision", "fused_head"};

// One line: what was asked, and why nothing of it runs (each reason's first
// instance in full, so a given field the model cannot take is named).
Status nothing_runs(const plan::SearchResult& r, const std::string& model,
                    const std::string& layout, const plan::SearchOptions& so,
                    const plan::Cluster& cluster) {
  std::string reasons;
  for (const auto& [kind, n] : r.rejected) {
    auto it = r.why.find(kind);
    reasons += (reasons.empty() ? "" : "; ") + (it == r.why.end() ? kind : it->second) +
               (n > 1 ? " (" + std::to_string(n) + " layouts)" : "");
  }
  return Status::invalid(
      "[plan] no layout of " + model + (layout.empty() ? "" : " with " + layout) + " runs on " +
      std::to_string(so.devices) + " devices of " + cluster.name + " with a global batch of " +
      std::to_string(so.global_batch) + (reasons.empty() ? "" : ": " + reasons));
}

// A --layout with fields left out: the search, kept to the given fields.
// Devices: --devices, else the layout's own dp x tp x pp (a field not given
// counting 1). Global batch: --global-batch, else dp x mb x m when mb, m and
// the grid say it, else the config's.
plan::SearchOptions layout_search(const PlanOptions& o, const plan::ParsedLayout& p,
                                  const plan::Candidate& config) {
  plan::SearchOptions so;
  so.fixed = plan::LayoutConstraints::from(p);
  so.base = p.c;
  so.top = o.top;
  const auto& f = so.fixed;
  const int64_t grid = int64_t(f.dp.value_or(1)) * f.tp.value_or(1) * f.pp.value_or(1);
  std::string named;  // "dp x tp"
  for (const char* k : {"dp", "tp", "pp"})
    if (p.has(k)) named += (named.empty() ? "" : " x ") + std::string(k);
  if (grid > plan::kMaxDevices)
    fail(Status::invalid("[plan] --layout: " + named + " = " + std::to_string(grid) +
                         " devices is more than " + std::to_string(plan::kMaxDevices)));
  const int64_t devices = o.devices > 0 ? o.devices : grid;
  if (devices % grid)
    fail(Status::invalid("[plan] --layout: " + named + " = " + std::to_string(grid) +
                         " does not divide --devices " + std::to_string(devices)));
  so.devices = int(devices);
  if (o.global_batch > 0) {
    so.global_batch = o.global_batch;
  } else if (f.mb && f.m && (f.dp || (f.tp && f.pp) || o.devices <= 0)) {
    so.global_batch =
        (f.dp ? *f.dp : devices / (int64_t(f.tp.value_or(1)) * f.pp.value_or(1))) * *f.mb * *f.m;
  } else {
    so.global_batch = config.global_batch();
  }
  return so;
}

// A --layout that gives every field: that one layout, predicted even when it
// does not fit (what it would take, with a warning).
void evaluate_layout(const PlanOptions& o, const runtime::Config& cfg, const plan::Cluster& cluster,
                     const std::string& model, const plan::ParsedLayout& parsed) {
  plan::Candidate c = parsed.c;
  const int64_t grid = int64_t(c.tp) * c.pp;
  const bool has_dp = parsed.has("dp"), has_m = parsed.has("m");
  const int64_t devices = o.devices > 0 ? o.devices : (has_dp ? c.world() : grid);
  if (devices > plan::kMaxDevices)
    fail(Status::invalid("[plan] --layout: " + std::to_string(devices) + " devices is more than " +
                         std::to_string(plan::kMaxDevices)));
  if (!has_dp) {
    if (devices % grid)
      fail(Status::invalid("[plan] --layout: tp x pp = " + std::to_string(grid) +
                           " does not divide --devices " + std::to_string(devices)));
    c.dp = int(devices / grid);
  } else if (o.devices > 0 && c.world() != o.devices) {
    fail(Status::invalid("[plan] --layout: dp x tp x pp = " + std::to_string(c.world()) +
                         " is not --devices " + std::to_string(o.devices)));
  }
  if (!has_m && o.global_batch > 0) {
    const int64_t per_step = int64_t(c.dp) * c.mb;
    if (o.global_batch % per_step)
      fail(Status::invalid("[plan] --layout: --global-batch " + std::to_string(o.global_batch) +
                           " does not divide by dp x mb = " + std::to_string(per_step)));
    if (o.global_batch / per_step > plan::kMaxMicroBatches)
      fail(Status::invalid("[plan] --layout: --global-batch " + std::to_string(o.global_batch) +
                           " is " + std::to_string(o.global_batch / per_step) +
                           " micro-batches per step, more than " +
                           std::to_string(plan::kMaxMicroBatches)));
    c.m = int(o.global_batch / per_step);
  } else if (o.global_batch > 0 && c.global_batch() != o.global_batch) {
    fail(Status::invalid("[plan] --layout: dp x mb x m = " + std::to_string(c.global_batch()) +
                         " is not --global-batch " + std::to_string(o.global_batch)));
  }
  const plan::Prediction p = plan::predict(cfg.model, c, cluster);
  if (!p.divides) fail(Status::invalid("[plan] " + c.describe() + " cannot run: " + p.why_not));
  // One that does not fit is still predicted: what it would take with more memory.
  if (o.json)
    std::printf("%s\n", plan::to_json(p).dump(1).c_str());
  else
    std::printf("%s on %s\n%s\n", model.c_str(), cluster.name.c_str(), row(p).c_str());
  if (!p.fits)
    std::fprintf(stderr, "[plan] warning: %s %s\n", c.describe().c_str(), p.why_not.c_str());
}

void run_plan(const PlanOptions& o) {
  if (!o.from_probe.empty()) {
    check_output(o.output.empty() ? "cluster.toml" : o.output);
    auto doc = read_json(o.from_probe);
    if (!doc) fail(Status::invalid(doc.status().message()));
    auto c = plan::cluster_from_probe(*doc, o.from_probe);
    if (!c) fail(c.status());
    write_out(o.output.empty() ? "cluster.toml" : o.output,
              plan::cluster_toml(
                  *c, "# This machine, from crucible probe (" + o.from_probe +
                          "); crucible plan --calibrate RUN... refits it. Schema: docs/plan.md\n"),
              "cluster description of " + c->name +
                  (o.output.empty() ? " (runs started in this directory predict with it)" : ""));
    return;
  }
  if (!o.calibrate.empty()) {
    // Refits --cluster (default: this machine's, as a run finds it) and
    // writes -o (default ./cluster.toml: a shipped file is never rewritten
    // in place unless asked).
    const std::string out = o.output.empty() ? "cluster.toml" : o.output;
    check_output(out);
    auto c = o.cluster.empty() ? runtime::local_cluster(".") : plan::load_cluster(o.cluster);
    if (!c) fail(c.status());
    std::vector<plan::Observation> runs;
    for (const std::string& dir : o.calibrate) {
      auto obs = runtime::observe_run(dir);
      if (!obs) fail(obs.status());
      runs.push_back(*obs);
    }
    auto fit = plan::calibrate(*c, runs);
    if (!fit) fail(fit.status());
    std::printf("%s", fit->report.c_str());
    write_out(out,
              plan::cluster_toml(fit->cluster, "# Calibrated by crucible plan --calibrate from " +
                                                   std::to_string(o.calibrate.size()) + " run(s). Schema: docs/plan.md\n"),
              "calibrated cluster description");
    return;
  }
  auto cfg = runtime::load_config(o.config, o.overrides);
  if (!cfg) fail(cfg.status());
  const plan::Cluster cluster = cluster_for(o);
  const plan::Candidate from_config = runtime::candidate_of(*cfg, cfg->dist.tp * cfg->dist.pp);
  const std::string model = model_name(o.config, cfg->model);
  plan::SearchOptions so;
  so.devices = o.devices > 0 ? o.devices : cluster.devices();
  so.global_batch = o.global_batch > 0 ? o.global_batch : from_config.global_batch();
  so.top = o.top;
  std::optional<plan::ParsedLayout> given;
  if (o.has_layout) {
    auto parsed = plan::parse_layout(o.layout, from_config);
    if (!parsed) fail(parsed.status());
    const bool complete = std::all_of(kLayoutFields.begin(), kLayoutFields.end(),
                                      [&](const char* k) { return parsed->has(k); });
    if (complete) return evaluate_layout(o, *cfg, cluster, model, *parsed);
    given = *parsed;
    so = layout_search(o, *parsed, from_config);
  }
  auto r = plan::search(cfg->model, cluster, so);
  if (!r) fail(r.status());
  if (given && r->best.empty()) fail(nothing_runs(*r, model, o.layout, so, cluster));
  std::vector<std::string> chosen;
  if (given)
    for (const std::string& k : plan::kSearchedFields)
      if (!given->has(k)) chosen.push_back(k);
  if (o.json) {
    nlohmann::json j = {{"devices", so.devices}, {"global_batch", so.global_batch}, {"evaluated", r->evaluated},
                        {"rejected", r->rejected}, {"cluster", cluster.name}};
    if (given) {
      j["given"] = given->given;
      j["chosen"] = chosen;
    }
    j["best"] = nlohmann::json::array();
    for (const auto& p : r->best) j["best"].push_back(plan::to_json(p));
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::string what = "best first";
    if (given) {
      std::string list;
      for (const std::string& k : chosen) list += (list.empty() ? "" : ", ") + k;
      what = "given " + o.layout + ", chosen " + (list.empty() ? "nothing" : list) + "; best first";
    }
    std::printf(
        "%s on %d device%s of %s, global batch %lld sequences of %d tokens: %lld layouts run, %s\n",
        model.c_str(), so.devices, so.devices == 1 ? "" : "s", cluster.name.c_str(),
        (long long)so.global_batch, cfg->model.seq_len, (long long)r->evaluated, what.c_str());
    for (size_t i = 0; i < r->best.size(); ++i) std::printf("%2zu. %s\n", i + 1, row(r->best[i]).c_str());
    for (const auto& [why, n] : r->rejected) std::printf("    rejected %lld: %s\n", (long long)n, why.c_str());
  }
  if (r->best.empty()) fail(nothing_runs(*r, model, "", so, cluster));
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  auto* cmd = app.add_subcommand("plan", "Predict memory and step time of parallel layouts; pick the best");
  cmd->add_option("config", o->config, "Run configuration (default: the embedded default)");
  cmd->add_option("--set", o->overrides, "Override a config key: section.key=value (repeatable)");
  cmd->add_option("--cluster", o->cluster,
                  "Cluster description (configs/clusters/*.toml; default: ./cluster.toml, else ./probe.json)");
  cmd->add_option("--devices", o->devices, "Devices to plan for (default: the whole cluster)")
      ->check(integer_in(1, 1 << 24));
  cmd->add_option("--global-batch", o->global_batch, "Sequences per optimizer step (default: the config's)")
      ->check(integer_in(1, int64_t(1) << 40));
  cmd->add_option("--top", o->top, "How many layouts to show")->check(integer_in(1, 1000))->capture_default_str();
  cmd->add_flag("--json", o->json, "Print JSON (schema: docs/plan.md)");
  auto* layout = cmd->add_option(
      "--layout", o->layout,
      "Fix these fields of the layout and search the rest, or evaluate one layout when "
      "every field is given: \"dp=8,tp=8,pp=8,v=2,mb=1,m=4,zero=1,recompute=selective,"
      "sp=true,schedule=interleaved,precision=bf16,fused_head=false\"");
  cmd->add_option("--cluster-from-probe", o->from_probe, "Write this machine's cluster file from a probe.json");
  cmd->add_option("--calibrate", o->calibrate, "Refit the cluster file's efficiencies from finished runs")
      ->expected(1, -1);
  auto* out =
      cmd->add_option("-o,--output", o->output,
                      "Where --cluster-from-probe / --calibrate write (default: cluster.toml)");
  cmd->callback([o, cmd, layout, out] {
    o->has_layout = layout->count() > 0;
    if (out->count() > 0 && o->output.empty())
      check_output("");  // -o "": a bad name, not the default
    // --cluster-from-probe writes a file and plans nothing: options that ask
    // for a plan beside it would be silently dropped.
    if (!o->from_probe.empty()) {
      std::string ignored;
      for (const char* name : {"config", "--layout", "--devices", "--global-batch", "--set",
                               "--calibrate", "--cluster", "--top", "--json"})
        if (cmd->get_option(name)->count() > 0)
          ignored += std::string(ignored.empty() ? "" : ", ") + name;
      if (!ignored.empty())
        throw ExitError(2,
                        "[plan] --cluster-from-probe only writes a cluster file (-o, default "
                        "./cluster.toml); it "
                        "takes no " +
                            ignored + ": write the file first, then plan with --cluster FILE");
    }
    run_plan(*o);
  });
}

}  // namespace crucible::cli
