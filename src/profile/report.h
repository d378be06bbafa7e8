// `crucible report RUN`: one self-contained HTML page showing where a run's
// time went, built from the run directory's files (docs/training.md, "Run
// directory"): config.toml, metrics.jsonl, metrics.rank{R}.jsonl,
// events.jsonl, probe.json (RUN's, else the working directory's),
// kernels.json, scaling.json and curation.json (the curation report of a run
// whose data was curated first). A `crucible curate` output directory (its
// report.json, no metrics) renders as a page with the curation section only.
//
// metrics.jsonl is required (but for a curate output); every other file is optional and its section is
// left out when the file is missing. A file that is present but not valid JSON
// is an error naming it (a report that silently drops data misleads). The
// page loads nothing from the network: charts are inline <svg> (profile/svg.h)
// and the CSS is inline. Sections carry ids (summary, loss, lr, step-time,
// throughput, memory, ranks, events, probe, roofline, scaling, curation). Pure reads;
// thread-safe.
#pragma once
#include <string>

#include "core/status.h"

namespace crucible::profile {

// The HTML page for RUN.
Result<std::string> render_report(const std::string& run_dir);

// render_report() written atomically to out_path (empty: RUN/report.html).
Status write_report(const std::string& run_dir, const std::string& out_path = "");

}  // namespace crucible::profile
