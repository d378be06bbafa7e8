// The end of a run (rank 0): RUN/kernels.json (what each kernel class did in
// this process, for the report's roofline: FLOPs and bytes from the cost
// models, kernels/cost.h), RUN/memory.json (this rank's up-front memory
// estimate by kind, beside what the allocator measured) and RUN/report.html
// (profile/report.h). A file that cannot be written is a logged warning: the
// run itself has ended well.
#pragma once
#include <string>

#include "data/dataset.h"
#include "runtime/config.h"

namespace crucible::runtime {

void write_run_report(const std::string& run, const Config& cfg, int world, int rank, const data::LogFn& log);

}  // namespace crucible::runtime
