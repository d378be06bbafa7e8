// Pieces of `crucible report` shared by its source files (report.cc and the
// sections kept in files of their own). Internal to src/profile.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "profile/svg.h"

namespace crucible::profile {

inline std::string html_section(const std::string& id, const std::string& title,
                                const std::string& body) {
  return "<section id=\"" + id + "\"><h2>" + svg::escape(title) + "</h2>\n" + body + "\n</section>\n";
}

// A key/value row of the report's tables (both escaped).
inline std::string kv_row(const std::string& k, const std::string& v) {
  return "<tr><th>" + svg::escape(k) + "</th><td>" + svg::escape(v) + "</td></tr>";
}

// A metrics row's number at `key`; NaN when absent or not a number.
double num(const nlohmann::json& row, const char* key);
// The median of the rows' finite values at `key`; NaN when there are none.
double median_column(const std::vector<nlohmann::json>& rows, const char* key);

// The "summary" section (report_summary.cc): the run's figures from the
// metrics rows `m` (its steps), RUN/config.toml's essential keys, and for a
// fine-tuning run (val_before: the validation loss before its first step,
// metrics.jsonl's step 0; NaN otherwise) "fine-tuned from X: val loss A -> B".
Result<std::string> summary_section(const std::string& run_dir, const std::vector<nlohmann::json>& m,
                                    double val_before);

// v with `digits` decimals and a unit; "-" when not finite.
std::string fmt_fixed(double v, int digits, const std::string& unit = "");

// The memory estimate by kind (RUN/memory.json: rank 0's up-front estimate,
// runtime/memory_estimate.h) beside the allocator's measured peak (bytes);
// "" when est is not an object.
std::string memory_estimate_table(const nlohmann::json& est, double measured_peak);

// The "prediction" section: RUN/plan.json's predicted step time by phase
// and peak memory beside the medians the metrics rows measured, with the
// error and a bar chart ("" when plan is not an object).
std::string prediction_section(const nlohmann::json& plan, const std::vector<nlohmann::json>& m);

// The "energy" section (report_energy.cc): the steps' energy, power and
// J/token from the metrics rows, and a GPU's power, SM clock, temperature and
// throttle reasons; where nothing was measured, RUN/log.txt's "[energy]" line
// saying why.
std::string energy_section(const std::string& run_dir, const std::vector<nlohmann::json>& m);

// The "curation" section from a report.json of `crucible curate`
// (schema crucible-curate/1): per-stage documents and bytes in and out, the
// removals by rule as bars, and examples of what each rule removed.
std::string curation_section(const nlohmann::json& report, const std::string& origin);

// The "pipeline" section: each rank's actions in the last traced step's
// pipeline schedule from RUN/trace.json ("" without a pipeline or a trace).
Result<std::string> pipeline_section(const std::string& run_dir);

// JSON lines. A last line without its newline that does not parse is a write
// in progress and is skipped; any other bad line is an error naming the file
// and line.
Result<std::vector<nlohmann::json>> read_jsonl(const std::string& path);
// The document at path; null when there is no file; an error naming the
// file when it does not parse.
Result<nlohmann::json> read_optional_json(const std::string& path);
// <!DOCTYPE html> ... <h1>: the top of every report page.
std::string page_head(const std::string& name);

// The report of a `crucible sim` run (RUN/sim.json marks one): its results,
// every metric over the steps, where the time went (trace.json), the
// workload's maps, the supervisor's events (report_sim.cc).
Result<std::string> sim_report(const std::string& run_dir);

}  // namespace crucible::profile
