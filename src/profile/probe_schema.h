// The probe document's schema check (probe.json, docs/probe.md): the one
// function every reader of a probe.json calls before using it (the planner's
// cluster_from_probe, train's MFU ceiling, report, probe --compare), so a
// damaged or hand-edited file is refused with one line naming the field
// ("[probe] probe.json: compute.gemm[2].gflops = 1e+308 is out of range
// [0, 1e+08]") instead of a json::type_error or an infinite ceiling.
//
// Checked: the schema tag; the type of every member a reader uses; and that
// every figure is finite and physically possible for one machine (bounds far
// above any real one: 1e8 GFLOP/s, 1e6 GB/s, 100 GHz, 2^24 threads, 1 PB of
// memory; rates and sizes not negative). Members it does not know are not
// checked (a newer probe may add some). A section that is absent is fine (a
// probe run with --sections); a reader that needs it says so itself.
// Pure function; thread-safe.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace crucible::profile {

// ok, or Status::invalid "[probe] SOURCE: FIELD ...".
Status check_probe_document(const nlohmann::json& probe, const std::string& source);

}  // namespace crucible::profile
