// Pieces of `crucible report` shared by its source files (report.cc and the
// sections kept in files of their own). Internal to src/profile.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "profile/svg.h"

namespace crucible::profile {

inline std::string html_section(const std::string& id, const std::string& title,
                                const std::string& body) {
  return "<section id=\"" + id + "\"><h2>" + svg::escape(title) + "</h2>\n" + body + "\n</section>\n";
}

// The "curation" section from a report.json of `crucible curate`
// (schema crucible-curate/1): per-stage documents and bytes in and out, the
// removals by rule as bars, and examples of what each rule removed.
std::string curation_section(const nlohmann::json& report, const std::string& origin);

// The "pipeline" section: each rank's actions in the last traced step's
// pipeline schedule from RUN/trace.json ("" without a pipeline or a trace).
Result<std::string> pipeline_section(const std::string& run_dir);

}  // namespace crucible::profile
