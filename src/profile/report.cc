#include "profile/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "core/file_io.h"
#include "core/format.h"
#include "profile/probe_schema.h"
#include "profile/report_sections.h"
#include "profile/run_schema.h"
#include "profile/svg.h"

// Charts are built with designated initializers (svg::Chart{.title = ...}); the
// members left out have default initializers, which GCC still warns about.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace crucible::profile {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using svg::escape;
using svg::format_number;

const double kNaN = std::nan("");

// The step-time parts, in the order they happen in a step (and are stacked).
const std::vector<std::pair<std::string, std::string>> kPhases = {{"data_wait_ms", "data_wait"},
                                                                  {"forward_ms", "forward"},
                                                                  {"backward_ms", "backward"},
                                                                  {"comm_ms", "comm"},
                                                                  {"optimizer_ms", "optimizer"}};

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found("[report] cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::io("[report] cannot read " + path);
  return ss.str();
}

// JSON lines. A last line without its newline that does not parse is a write
// in progress (the trainer appends while we read) and is skipped; any other
// bad line is an error naming the file and line.
}  // namespace

Result<std::vector<json>> read_jsonl(const std::string& path) {
  auto text = read_text(path);
  if (!text) return text.status();
  std::vector<json> rows;
  const std::string& s = *text;
  size_t pos = 0, line_no = 0;
  while (pos < s.size()) {
    size_t end = s.find('\n', pos);
    const bool terminated = end != std::string::npos;
    if (!terminated) end = s.size();
    const std::string line = s.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      if (!terminated) break;
      return Status::corrupt("[report] " + path + ":" + std::to_string(line_no) +
                             ": not a JSON object");
    }
    rows.push_back(std::move(j));
  }
  return rows;
}

// An optional JSON document: null when absent, an error when unreadable.
Result<json> read_optional_json(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return json();
  auto text = read_text(path);
  if (!text) return text.status();
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded()) return Status::corrupt("[report] " + path + ": not valid JSON");
  return j;
}

double num(const json& j, const char* key) {
  if (!j.is_object()) return kNaN;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : kNaN;
}

namespace {

double at_path(const json& j, std::initializer_list<const char*> keys) {
  const json* p = &j;
  for (const char* k : keys) {
    if (!p->is_object() || !p->contains(k)) return kNaN;
    p = &(*p)[k];
  }
  return p->is_number() ? p->get<double>() : kNaN;
}

std::vector<double> column(const std::vector<json>& rows, const char* key, double scale = 1) {
  std::vector<double> v;
  v.reserve(rows.size());
  for (const json& r : rows) v.push_back(num(r, key) * scale);
  return v;
}

double median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

double median_column(const std::vector<json>& rows, const char* key) { return median(column(rows, key)); }

namespace {

double mean(const std::vector<double>& v) {
  double s = 0;
  size_t n = 0;
  for (double x : v)
    if (std::isfinite(x)) s += x, ++n;
  return n ? s / n : kNaN;
}

std::string section(const std::string& id, const std::string& title, const std::string& body) {
  return "<section id=\"" + id + "\"><h2>" + escape(title) + "</h2>\n" + body + "\n</section>\n";
}


// ---- sections --------------------------------------------------------------

std::vector<svg::Marker> event_markers(const std::vector<json>& events) {
  std::vector<svg::Marker> out;
  for (const json& e : events) {
    double x = num(e, "step");
    if (!std::isfinite(x)) x = num(e, "resume_step");
    if (!std::isfinite(x)) continue;
    const std::string name = e.value("event", std::string("event"));
    std::string label = name + " at step " + format_number(x);
    if (e.contains("message") && e["message"].is_string())
      label += ": " + e["message"].get<std::string>();
    out.push_back({x, label, name == "failure" || name == "gave_up" ? "#d62728" : "#888"});
  }
  return out;
}

std::string loss_section(const std::vector<json>& m, const std::vector<json>& events) {
  svg::Chart c{.title = "Loss", .x_label = "step", .y_label = "loss"};
  c.y_from_zero = false;
  c.series.push_back({.name = "train loss", .x = column(m, "step"), .y = column(m, "loss")});
  svg::Series val{.name = "val loss"};
  for (const json& r : m)
    if (num(r, "val_loss") >= 0)
      val.x.push_back(num(r, "step")), val.y.push_back(num(r, "val_loss"));
  if (!val.x.empty()) c.series.push_back(val);
  c.markers = event_markers(events);
  std::string note =
      c.markers.empty()
          ? ""
          : "<p class=\"note\">Dashed lines: supervisor events (hover for details).</p>";
  return section("loss", "Loss", svg::render(c) + note);
}

std::string lr_section(const std::vector<json>& m) {
  svg::Chart c{.title = "Learning rate", .x_label = "step", .y_label = "lr"};
  c.series.push_back({.name = "lr", .x = column(m, "step"), .y = column(m, "lr")});
  return section("lr", "Learning rate", svg::render(c));
}

std::string step_time_section(const std::vector<json>& m) {
  svg::Chart c{.title = "Step time breakdown", .x_label = "step", .y_label = "ms"};
  const std::vector<double> steps = column(m, "step");
  std::vector<double> other = column(m, "step_ms");
  std::string table =
      "<table class=\"grid\"><tr><th>phase</th><th>mean ms</th><th>share of step</th></tr>";
  const double step_mean = mean(column(m, "step_ms"));
  // Steps replayed from a CUDA graph (metrics.h graph_ms, launch to
  // read-back): what of it is outside the step's parts is a part of its own
  // (all of it where the graph does not time them), 0 in the steps launched
  // kernel by kernel.
  auto phases = kPhases;
  const bool graphs = std::any_of(m.begin(), m.end(), [](const json& r) { return r.contains("graph_ms"); });
  if (graphs) phases.push_back({"graph_ms", "cuda graph (rest)"});
  for (const auto& [key, name] : phases) {
    std::vector<double> y = column(m, key.c_str());
    if (key == "graph_ms")
      for (size_t i = 0; i < y.size(); ++i) {
        if (!std::isfinite(y[i])) {
          y[i] = 0.0;
          continue;
        }
        for (const char* part : {"forward_ms", "backward_ms", "optimizer_ms"})
          if (const double v = num(m[i], part); std::isfinite(v)) y[i] -= v;
        y[i] = std::max(0.0, y[i]);
      }
    for (size_t i = 0; i < y.size(); ++i)
      if (std::isfinite(y[i])) other[i] -= y[i];
    table += "<tr><td>" + name + "</td><td>" + fmt_fixed(mean(y), 2) + "</td><td>" +
             fmt_fixed(mean(y) / step_mean * 100, 1, " %") + "</td></tr>";
    c.series.push_back({.name = name, .x = steps, .y = std::move(y), .kind = svg::Kind::kStacked});
  }
  // What the parts leave of step_ms: loop overhead (clipping, bookkeeping).
  for (double& v : other) v = std::isfinite(v) ? std::max(0.0, v) : kNaN;
  table += "<tr><td>other</td><td>" + fmt_fixed(mean(other), 2) + "</td><td>" +
           fmt_fixed(mean(other) / step_mean * 100, 1, " %") + "</td></tr></table>";
  c.series.push_back(
      {.name = "other", .x = steps, .y = other, .kind = svg::Kind::kStacked, .color = "#bab0ac"});
  for (const json& r : m) {
    const double stall = num(r, "ckpt_stall_ms");
    if (stall > 0)
      c.markers.push_back({num(r, "step"),
                           "checkpoint stall " + fmt_fixed(stall, 1) + " ms (wait " +
                               fmt_fixed(num(r, "ckpt_wait_ms"), 1) + " ms)",
                           "#d62728"});
  }
  std::string note =
      c.markers.empty()
          ? ""
          : "<p class=\"note\">Red dashed lines: checkpoint stalls (outside step_ms).</p>";
  return section("step-time", "Step time", svg::render(c) + note + table);
}

std::string throughput_section(const std::vector<json>& m) {
  const std::vector<double> steps = column(m, "step");
  svg::Chart t{.title = "Throughput", .x_label = "step", .y_label = "tokens/s"};
  t.series.push_back({.name = "tokens_per_s", .x = steps, .y = column(m, "tokens_per_s")});
  svg::Chart u{.title = "Model FLOPs utilisation", .x_label = "step", .y_label = "MFU %"};
  u.series.push_back({.name = "mfu", .x = steps, .y = column(m, "mfu", 100)});
  return section("throughput", "Throughput and MFU", svg::render(t) + svg::render(u));
}

// m: the metrics rows; est: RUN/memory.json (null when absent).
std::string memory_section(const std::vector<json>& m, const json& est) {
  const double mib = 1.0 / (1 << 20);
  double peak = 0;
  for (const json& r : m) peak = std::max(peak, num(r, "mem_peak"));
  const std::string table = memory_estimate_table(est, peak);
  svg::Chart c{.title = "Allocator memory", .x_label = "step", .y_label = "MiB"};
  c.series.push_back(
      {.name = "mem_in_use", .x = column(m, "step"), .y = column(m, "mem_in_use", mib)});
  c.series.push_back({.name = "mem_peak",
                      .x = column(m, "step"),
                      .y = column(m, "mem_peak", mib),
                      .dashed = true});
  return section("memory", "Memory", table + svg::render(c));
}

Result<std::string> ranks_section(const std::string& run_dir) {
  std::map<int, std::string> files;  // rank -> path, in rank order
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    const std::string name = e.path().filename().string();
    int r = -1;
    char tail[8] = {0};
    if (std::sscanf(name.c_str(), "metrics.rank%d.%7s", &r, tail) == 2 &&
        std::string(tail) == "jsonl" && r >= 0)
      files[r] = e.path().string();
  }
  if (files.empty()) return std::string();
  svg::BarChart c{.title = "Mean time per phase, per rank", .y_label = "ms"};
  for (const auto& [key, name] : kPhases) c.categories.push_back(name);
  c.categories.push_back("step");
  std::string table = "<table class=\"grid\"><tr><th>rank</th>";
  for (const auto& n : c.categories) table += "<th>" + n + " ms</th>";
  table += "</tr>";
  for (const auto& [r, path] : files) {
    auto rows = read_jsonl(path);
    if (!rows) return rows.status();
    svg::Series s{.name = "rank " + std::to_string(r)};
    for (const auto& [key, name] : kPhases) s.y.push_back(mean(column(*rows, key.c_str())));
    s.y.push_back(mean(column(*rows, "step_ms")));
    table += "<tr><td>" + std::to_string(r) + "</td>";
    for (double v : s.y) table += "<td>" + fmt_fixed(v, 2) + "</td>";
    table += "</tr>";
    c.series.push_back(std::move(s));
  }
  table += "</table>";
  return section("ranks", "Per-rank comparison", svg::render(c) + table);
}

// An event's field as text: a string as it is, anything else as JSON; "" when absent.
std::string field_text(const json& e, const char* k) {
  if (!e.contains(k)) return std::string();
  return e[k].is_string() ? e[k].get<std::string>() : e[k].dump();
}

std::string events_section(const std::vector<json>& events) {
  std::string t =
      "<table class=\"grid\"><tr><th>time</th><th>t "
      "(s)</th><th>event</th><th>attempt</th><th>step</th><th>details</th></tr>";
  // Inside Slurm: each start's wait in the queue (supervisor: "queue" events).
  std::string queue;
  for (const json& e : events) {
    std::string details;
    for (const auto& [k, v] : e.items()) {
      if (k == "time" || k == "t_s" || k == "event" || k == "attempt" || k == "step") continue;
      details += (details.empty() ? "" : "; ") + k + "=" + field_text(e, k.c_str());
    }
    auto str = [&](const char* k) { return field_text(e, k); };
    const std::string ev = str("event");
    t += std::string("<tr") + (ev == "failure" || ev == "gave_up" ? " class=\"bad\"" : "") +
         "><td>" + escape(str("time")) + "</td><td>" + escape(str("t_s")) + "</td><td>" +
         escape(ev) + "</td><td>" + escape(str("attempt")) + "</td><td>" + escape(str("step")) +
         "</td><td>" + escape(details) + "</td></tr>";
    if (ev == "queue")
      queue += "<tr><td>" + escape(str("job_id")) + "</td><td>" + format_number(num(e, "restarts")) + "</td><td>" +
               escape(str("submit")) + "</td><td>" + escape(str("start")) + "</td><td>" +
               format_number(num(e, "wait_s")) + "</td><td>" + escape(str("reason")) + "</td></tr>";
  }
  if (!queue.empty())
    queue = "<p>Time each start of the job waited in the Slurm queue (submit to start; a requeue submits again):</p>"
            "<table class=\"grid\"><tr><th>job</th><th>requeues</th><th>submitted</th><th>started</th><th>waited (s)</th>"
            "<th>reason</th></tr>" + queue + "</table>";
  return section("events", "Faults and restarts", queue + t + "</table>");
}

// Compute ceiling: the best valid GEMM (what the kernels can reach), else the
// derived FMA peak. Memory ceiling: STREAM triad on all threads. GFLOP/s, GB/s.
double compute_ceiling(const json& probe, std::string* what) {
  double best = kNaN;
  if (probe.contains("compute") && probe["compute"].contains("gemm") &&
      probe["compute"]["gemm"].is_array())
    for (const json& g : probe["compute"]["gemm"]) {
      if (g.value("valid", true) != true) continue;
      const double v = num(g, "gflops");
      if (std::isfinite(v) && !(v <= best)) {
        best = v;
        if (what)
          *what = g.value("name", std::string("gemm")) + " " + g.value("dtype", std::string()) +
                  " " + format_number(num(g, "threads")) + " threads";
      }
    }
  if (std::isfinite(best)) return best;
  if (what) *what = "derived FMA peak";
  return at_path(probe, {"compute", "peak", "derived_gflops_all"});
}

double triad_gbs(const json& probe) {
  return at_path(probe, {"memory", "threads_all", "triad", "best_gbs"});
}

std::string probe_section(const json& probe, const std::string& origin) {
  std::string body = "<p class=\"note\">From " + escape(origin) + "</p><table class=\"kv\">";
  if (probe.contains("host") && probe["host"].is_string())
    body += kv_row("host", probe["host"].get<std::string>());
  body +=
      kv_row("FMA peak (all threads)",
          format_number(at_path(probe, {"compute", "peak", "derived_gflops_all"})) + " GFLOP/s");
  std::string what;
  const double gemm = compute_ceiling(probe, &what);
  body += kv_row("best GEMM", format_number(gemm) + " GFLOP/s (" + what + ")");
  body += kv_row("STREAM triad (all threads)", format_number(triad_gbs(probe)) + " GB/s");
  if (probe.contains("storage") && probe["storage"].is_array())
    for (const json& s : probe["storage"])
      body += kv_row("storage " + s.value("dir", std::string("?")) + " (" +
                      s.value("filesystem", std::string("?")) + ")",
                  "write " + format_number(num(s, "seq_write_gbs")) + " GB/s, read " +
                      format_number(num(s, "seq_read_gbs")) + " GB/s, 4 KiB p50 " +
                      format_number(at_path(s, {"rand_read_4k_us", "p50"})) + " us");
  if (probe.contains("interconnect")) {
    const json& ic = probe["interconnect"];
    if (ic.contains("collectives") && ic["collectives"].is_object()) {
      for (const auto& [coll, obj] : ic["collectives"].items()) {
        double best = kNaN;
        if (obj.contains("comm") && obj["comm"].is_array())
          for (const json& p : obj["comm"])
            if (!(num(p, "busbw_gbs") <= best)) best = num(p, "busbw_gbs");
        body += kv_row(
            "interconnect " + coll + " busbw (best, " + format_number(num(ic, "ranks")) + " ranks)",
            format_number(best) + " GB/s");
      }
    } else if (ic.contains("skipped") && ic["skipped"].is_string()) {
      body += kv_row("interconnect", ic["skipped"].get<std::string>());
    }
  }
  return section("probe", "Machine probe", body + "</table>");
}

Result<std::string> roofline_section(const json& kernels, const json& probe,
                                     const std::string& path) {
  if (!kernels.is_array())
    return Status::corrupt("[report] " + path + ": expected an array of kernels");
  svg::Chart c{
      .title = "Roofline", .x_label = "arithmetic intensity (FLOP/byte)", .y_label = "GFLOP/s"};
  c.log_x = c.log_y = true;
  svg::Series pts{.name = "kernels", .kind = svg::Kind::kPoints};
  double imin = 1e300, imax = 0;
  std::string table =
      "<table class=\"grid\"><tr><th>class</th><th>FLOP/byte</th><th>GFLOP/s</th></tr>";
  for (const json& k : kernels) {
    const double f = num(k, "flops"), b = num(k, "bytes"), s = num(k, "seconds");
    if (!(f > 0 && b > 0 && s > 0)) continue;
    const std::string cls = k.value("class", std::string("?"));
    pts.x.push_back(f / b), pts.y.push_back(f / s / 1e9);
    pts.labels.push_back(cls + ": " + format_number(f / b) + " FLOP/B, " +
                         format_number(f / s / 1e9) + " GFLOP/s");
    imin = std::min(imin, f / b), imax = std::max(imax, f / b);
    table += "<tr><td>" + escape(cls) + "</td><td>" + format_number(f / b) + "</td><td>" +
             format_number(f / s / 1e9) + "</td></tr>";
  }
  if (pts.x.empty()) imin = 0.1, imax = 100;
  const double peak = probe.is_null() ? kNaN : compute_ceiling(probe, nullptr);
  const double bw = probe.is_null() ? kNaN : triad_gbs(probe);
  // The ceilings span two decades either side of the kernels (and the ridge).
  double lo = imin / 10, hi = imax * 10;
  if (peak > 0 && bw > 0) lo = std::min(lo, peak / bw / 10), hi = std::max(hi, peak / bw * 10);
  if (peak > 0)
    c.series.push_back(
        {.name = "compute ceiling", .x = {lo, hi}, .y = {peak, peak}, .color = "#e15759"});
  if (bw > 0 && !(peak > 0 && peak / bw <= lo)) {
    svg::Series mem{.name = "memory ceiling", .color = "#4e79a7"};
    const double top = peak > 0 ? peak / bw : hi;  // the ridge point
    mem.x = {lo, std::min(top, hi)};
    mem.y = {bw * lo, bw * std::min(top, hi)};
    c.series.push_back(mem);
  }
  c.series.push_back(pts);
  std::string note =
      probe.is_null() ? "<p class=\"note\">No probe.json: ceilings not drawn.</p>" : "";
  return section("roofline", "Roofline", svg::render(c) + note + table + "</table>");
}

Result<std::string> scaling_section(const json& sc, const std::string& path) {
  if (!sc.is_object() || !sc.contains("points") || !sc["points"].is_array())
    return Status::corrupt("[report] " + path + ": expected {\"points\": [...]}");
  svg::Chart c{.title = "Scaling", .x_label = "ranks", .y_label = "speedup"};
  c.log_x = c.log_y = true;
  svg::Series meas{.name = "measured", .kind = svg::Kind::kPoints};
  double nmax = 1;
  for (const json& p : sc["points"]) {
    const double n = num(p, "ranks"), s = num(p, "speedup");
    if (!(n > 0 && s > 0)) continue;
    meas.x.push_back(n), meas.y.push_back(s);
    meas.labels.push_back(format_number(n) + " ranks: " + format_number(s) + "x");
    nmax = std::max(nmax, n);
  }
  meas.color = "#59a14f";
  svg::Series ideal{.name = "ideal", .dashed = true, .color = "#888"};
  svg::Series amdahl{.name = "amdahl", .color = "#f28e2b"};
  const double f = num(sc, "serial_fraction");
  for (double n = 1; n <= nmax * 1.0001; n *= std::pow(2.0, 0.25)) {
    ideal.x.push_back(n), ideal.y.push_back(n);
    if (f >= 0 && f <= 1) amdahl.x.push_back(n), amdahl.y.push_back(1 / (f + (1 - f) / n));
  }
  c.series = {ideal};
  if (!amdahl.x.empty()) {
    amdahl.name = "amdahl (serial " + format_number(f) + ")";
    c.series.push_back(amdahl);
  }
  c.series.push_back(meas);
  return section("scaling", "Scaling", svg::render(c));
}

const char* kCss = R"(body{font-family:sans-serif;margin:24px;max-width:1100px;color:#222}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
table{border-collapse:collapse;margin:8px 0}th,td{padding:3px 10px;text-align:left;font-size:13px}
table.grid td,table.grid th{border:1px solid #ddd}table.kv th{color:#555;font-weight:normal}
tr.bad td{background:#fde8e8}.note{color:#666;font-size:12px}svg{display:block;margin:8px 0}
pre{background:#f6f6f6;padding:8px;font-size:12px;overflow:auto})";

// The curation report a directory holds: RUN/curation.json (a run whose data
// was curated first) or the report.json of a `crucible curate` output.
Result<json> read_curation(const std::string& dir, std::string* origin) {
  *origin = dir + "/curation.json";
  auto c = read_optional_json(*origin);
  if (!c || !c->is_null()) return c;
  *origin = dir + "/report.json";
  auto r = read_optional_json(*origin);
  if (r && r->is_object() && r->value("schema", "") == "crucible-curate/1") return r;
  return json();
}

}  // namespace

std::string page_head(const std::string& name) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>crucible report: " +
         escape(name) + "</title><style>" + kCss + "</style></head><body>\n<h1>crucible report: " +
         escape(name) + "</h1>\n";
}

Result<std::string> render_report(const std::string& run_dir) {
  std::error_code sim_ec;
  if (fs::exists(run_dir + "/sim.json", sim_ec)) return sim_report(run_dir);  // `crucible sim`
  const std::string mpath = run_dir + "/metrics.jsonl";
  const std::string name = fs::path(run_dir).lexically_normal().filename().string();
  std::error_code ec;
  std::string curation_origin;
  auto curation = read_curation(run_dir, &curation_origin);
  if (!curation) return curation.status();
  // A `crucible curate` output directory: its page is the curation section.
  if (!fs::exists(mpath, ec) && !curation->is_null())
    return page_head(name) + curation_section(*curation, curation_origin) + "</body></html>\n";
  if (!fs::exists(mpath, ec))
    return Status::not_found("[report] " + mpath + ": missing (is " + run_dir +
                             " a run directory?)");
  auto metrics = read_jsonl(mpath);
  if (!metrics) return metrics.status();
  for (size_t i = 0; i < metrics->size(); ++i)
    CRUCIBLE_RETURN_IF_ERROR(
        check_metrics_row((*metrics)[i], "[report]", mpath + " row " + std::to_string(i + 1)));
  // A fine-tuning run's step 0 (the validation loss before its first step)
  // is the summary's; the sections plot the steps.
  double val_before = kNaN;
  std::vector<json> m;
  for (json& r : *metrics)
    if (num(r, "step") == 0)
      val_before = num(r, "val_loss");
    else
      m.push_back(std::move(r));
  if (m.empty()) return Status::invalid("[report] " + mpath + ": no steps yet");

  std::vector<json> events;
  if (fs::exists(run_dir + "/events.jsonl", ec)) {
    auto ev = read_jsonl(run_dir + "/events.jsonl");
    if (!ev) return ev.status();
    for (size_t i = 0; i < ev->size(); ++i)
      CRUCIBLE_RETURN_IF_ERROR(check_event_row((*ev)[i], "[report]",
                                               run_dir + "/events.jsonl row " + std::to_string(i + 1)));
    events = std::move(*ev);
  }
  std::string probe_origin = run_dir + "/probe.json";
  if (!fs::exists(probe_origin, ec)) probe_origin = "probe.json";  // the working directory's
  // The probe is consulted, not the run's own: one that fails its schema is
  // left out, and the report says why.
  auto probe = read_optional_json(probe_origin);
  std::string probe_ignored;
  if (!probe) probe_ignored = probe.status().message(), probe = json();
  if (Status ps = probe->is_null() ? Status::ok() : check_probe_document(*probe, probe_origin); !ps)
    probe_ignored = ps.message(), *probe = json();
  auto kernels = read_optional_json(run_dir + "/kernels.json");
  if (!kernels) return kernels.status();
  if (!kernels->is_null())
    CRUCIBLE_RETURN_IF_ERROR(check_kernels(*kernels, "[report]", run_dir + "/kernels.json"));
  auto scaling = read_optional_json(run_dir + "/scaling.json");
  if (!scaling) return scaling.status();

  std::string html = page_head(name);
  auto summary = summary_section(run_dir, m, val_before);
  if (!summary) return summary.status();
  html += *summary;
  html += loss_section(m, events);
  html += lr_section(m);
  html += step_time_section(m);
  html += throughput_section(m);
  html += energy_section(run_dir, m);
  auto mem_est = read_optional_json(run_dir + "/memory.json");
  if (!mem_est) return mem_est.status();
  if (!mem_est->is_null())
    CRUCIBLE_RETURN_IF_ERROR(check_memory_estimate(*mem_est, "[report]", run_dir + "/memory.json"));
  html += memory_section(m, *mem_est);
  auto plan = read_optional_json(run_dir + "/plan.json");
  if (!plan) return plan.status();
  if (!plan->is_null())
    CRUCIBLE_RETURN_IF_ERROR(check_plan_document(*plan, "[report]", run_dir + "/plan.json"));
  html += prediction_section(*plan, m);
  auto ranks = ranks_section(run_dir);
  if (!ranks) return ranks.status();
  html += *ranks;
  auto pipeline = pipeline_section(run_dir);
  if (!pipeline) return pipeline.status();
  html += *pipeline;
  if (!events.empty()) html += events_section(events);
  if (!probe->is_null()) html += probe_section(*probe, probe_origin);
  if (!probe_ignored.empty())
    html +=
        section("probe", "Probe", "<p class=\"note\">" + escape(probe_ignored) + " (ignored)</p>");
  if (!kernels->is_null()) {
    auto s = roofline_section(*kernels, *probe, run_dir + "/kernels.json");
    if (!s) return s.status();
    html += *s;
  }
  if (!scaling->is_null()) {
    auto s = scaling_section(*scaling, run_dir + "/scaling.json");
    if (!s) return s.status();
    html += *s;
  }
  if (!curation->is_null()) html += curation_section(*curation, curation_origin);
  return html + "</body></html>\n";
}

Status write_report(const std::string& run_dir, const std::string& out_path) {
  auto html = render_report(run_dir);
  if (!html) return html.status();
  return write_file_atomic(out_path.empty() ? run_dir + "/report.html" : out_path, *html);
}

}  // namespace crucible::profile
