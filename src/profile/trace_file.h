// Trace files: the recorder's events (core/trace.h) as Chrome trace JSON
// ({"traceEvents":[...]}, loadable in Perfetto and chrome://tracing).
//
// Each rank writes its own file (pid = rank, ts/dur in µs since the rank's
// trace origin, one "M" process_name "rank R (label)" and one "M" thread_name
// per thread); merge_traces() joins them into one file with one process per
// rank. Every file is written atomically (core/file_io.h). validate_trace()
// checks what Perfetto silently mis-draws: missing fields, unbalanced B/E, and
// complete events that overlap without nesting on one thread.
// Free functions, no shared state: thread-safe.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/trace.h"

namespace crucible::profile {

// Writes `events` as rank `rank`'s trace; threads are named from
// trace::thread_names() (or `thread_names` when given), "thread N" otherwise.
Status write_rank_trace(const std::string& path, int rank, const std::string& label,
                        const std::vector<trace::Event>& events);
Status write_rank_trace(const std::string& path, int rank, const std::string& label,
                        const std::vector<trace::Event>& events,
                        const std::vector<std::pair<int, std::string>>& thread_names);

// Joins rank files into `out`: metadata first, then each process's events
// sorted by ts. Each input must be a valid trace (validate_trace), and no two
// inputs may share a pid. Errors name the offending file.
Status merge_traces(const std::vector<std::string>& rank_files, const std::string& out);

// Checks a parsed trace document (see the header comment). The error names
// the first bad event by index, name, ph, pid, tid and ts.
Status validate_trace(const nlohmann::json& doc);
// Reads, parses and validates a trace file.
Status validate_trace_file(const std::string& path);

}  // namespace crucible::profile
