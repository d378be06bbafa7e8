// The schema checks of a run directory's JSON files that crucible reads back
// (docs/errors.md, "Files crucible reads back"): plan.json (the planner's
// prediction, written before the first step), each metrics.jsonl row, and
// the report's memory.json, kernels.json and events.jsonl rows. One
// function per format, built from core/json_schema.h; every reader calls it
// before using the document (report, plan --calibrate), so a damaged or
// hand-edited file is one line naming the file and the field, exit 2:
// "[report] runs/x/plan.json: breakdown must be an object, not an array".
// trace.json's check is validate_trace (profile/trace_file.h).
//
// Ranges are physical bounds far above any real run (a step of 1e9 ms, 1e18
// bytes, 1e15 tokens/s), so 1e308 or a negative time is refused while every
// figure a real run writes passes. A metrics row's loss, gradient norm,
// validation loss, tokens/s and MFU may be null (nlohmann writes a NaN or an
// infinity as null: a diverged step, a zero-length interval).
// Pure functions; thread-safe.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace crucible::profile {

// op: the reader's "[report]" / "[plan]"; source: the file as named to the user.
Status check_plan_document(const nlohmann::json& plan, const std::string& op,
                           const std::string& source);
// One row; source names the file and line ("runs/x/metrics.jsonl:12").
Status check_metrics_row(const nlohmann::json& row, const std::string& op,
                         const std::string& source);
// The report's other inputs: memory.json (the memory estimate), kernels.json
// (per kernel class: flops, bytes, seconds) and one events.jsonl row.
Status check_memory_estimate(const nlohmann::json& est, const std::string& op,
                             const std::string& source);
Status check_kernels(const nlohmann::json& kernels, const std::string& op,
                     const std::string& source);
Status check_event_row(const nlohmann::json& row, const std::string& op,
                       const std::string& source);

// Whether a metrics row measured its step's parts (forward, backward,
// optimizer): every step launched kernel by kernel, and a step replayed from
// a CUDA graph that times them (a split graph, kernels/step_graph.h); not a
// replayed step whose graph is whole (graph_ms and no parts: its 0s are not
// measurements).
bool row_has_parts(const nlohmann::json& row);

}  // namespace crucible::profile
