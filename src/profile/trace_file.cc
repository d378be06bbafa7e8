#include "profile/trace_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/file_io.h"

namespace crucible::profile {

using nlohmann::json;

namespace {

// Timestamps within a thread may disagree by the µs rounding of ts and dur.
constexpr double kRoundingUs = 1.0;

std::string json_string(const std::string& s) { return json(s).dump(); }

// Escaped names, by pointer: event names are a few static strings repeated
// millions of times, so each is escaped once.
class NameCache {
 public:
  const std::string& get(const char* s) {
    auto it = cache_.find(s);
    if (it != cache_.end()) return it->second;
    return cache_.emplace(s, json_string(s)).first->second;
  }

 private:
  std::unordered_map<const char*, std::string> cache_;
};

std::string metadata_event(const char* what, int pid, int tid, const std::string& name) {
  return fmt::format(R"({{"name":"{}","ph":"M","ts":0,"pid":{},"tid":{},"args":{{"name":{}}}}})",
                     what, pid, tid, json_string(name));
}

bool is_metadata_name(const std::string& n) {
  return n == "process_name" || n == "thread_name" || n == "process_sort_index" ||
         n == "thread_sort_index" || n == "process_labels";
}

// "event 7 ("forward", ph X, pid 0, tid 1, ts 12.500)", from whatever fields exist.
std::string describe(const json& events, size_t i) {
  const json& e = events[i];
  std::string s = fmt::format("event {}", i);
  if (!e.is_object()) return s;
  std::vector<std::string> parts;
  if (e.contains("name") && e["name"].is_string()) parts.push_back(json_string(e["name"]));
  if (e.contains("ph") && e["ph"].is_string()) parts.push_back("ph " + e["ph"].get<std::string>());
  for (const char* k : {"pid", "tid", "ts", "dur"}) {
    if (e.contains(k) && e[k].is_number()) parts.push_back(fmt::format("{} {}", k, e[k].dump()));
  }
  if (parts.empty()) return s;
  s += " (";
  for (size_t k = 0; k < parts.size(); ++k) s += (k ? ", " : "") + parts[k];
  return s + ")";
}

struct BadEvent {
  size_t index;
  std::string message;
};

// Fields every event must have, and what each phase requires.
std::optional<BadEvent> check_fields(const json& events, size_t i) {
  const json& e = events[i];
  auto bad = [&](const std::string& why) { return BadEvent{i, describe(events, i) + ": " + why}; };
  if (!e.is_object()) return bad("not a JSON object");
  if (!e.contains("name") || !e["name"].is_string()) return bad("missing \"name\" (a string)");
  if (!e.contains("ph") || !e["ph"].is_string()) return bad("missing \"ph\" (a string)");
  if (!e.contains("ts") || !e["ts"].is_number()) return bad("missing \"ts\" (a number)");
  if (!std::isfinite(e["ts"].get<double>())) return bad("\"ts\" is not finite");
  for (const char* k : {"pid", "tid"}) {
    if (!e.contains(k) || !e[k].is_number_integer())
      return bad(fmt::format("missing \"{}\" (an integer)", k));
  }
  const std::string ph = e["ph"];
  const std::string name = e["name"];
  if (ph == "M") {
    if (!is_metadata_name(name)) return bad("\"M\" event with a name that is not a metadata name");
    if (!e.contains("args") || !e["args"].is_object()) return bad("\"M\" event without \"args\"");
  } else if (is_metadata_name(name)) {
    return bad("metadata event with ph other than \"M\"");
  } else if (ph == "X") {
    if (!e.contains("dur") || !e["dur"].is_number())
      return bad("\"X\" event without \"dur\" (a number)");
    if (!(e["dur"].get<double>() >= 0) || !std::isfinite(e["dur"].get<double>()))
      return bad("\"dur\" is negative or not finite");
  } else if (ph != "B" && ph != "E" && ph != "C" && ph != "i" && ph != "I") {
    return bad("unsupported ph (expected X, B, E, C, i, I or M)");
  }
  return std::nullopt;
}

// Complete events on one thread must nest: each starts at/after the enclosing
// one and ends at/before it (within kRoundingUs).
std::optional<BadEvent> check_complete_nesting(const json& events, const std::vector<size_t>& idx) {
  // (ts, end, index), extracted once: sorting through json lookups is slow.
  struct Span {
    double ts, end;
    size_t i;
  };
  std::vector<Span> spans;
  spans.reserve(idx.size());
  for (size_t i : idx) {
    const double ts = events[i]["ts"].get<double>();
    spans.push_back({ts, ts + events[i]["dur"].get<double>(), i});
  }
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    if (a.ts != b.ts) return a.ts < b.ts;
    return a.end > b.end;  // the enclosing one first
  });
  std::vector<Span> open;
  for (const Span& s : spans) {
    while (!open.empty() && open.back().end <= s.ts + kRoundingUs) open.pop_back();
    if (!open.empty() && s.end > open.back().end + kRoundingUs) {
      return BadEvent{s.i, fmt::format("{}: overlaps {} without nesting in it",
                                       describe(events, s.i), describe(events, open.back().i))};
    }
    open.push_back(s);
  }
  return std::nullopt;
}

// B/E pairs on one thread must balance and nest (E closes the innermost B).
std::optional<BadEvent> check_begin_end(const json& events, const std::vector<size_t>& idx) {
  std::vector<std::pair<double, size_t>> order;  // (ts, index)
  order.reserve(idx.size());
  for (size_t i : idx) order.emplace_back(events[i]["ts"].get<double>(), i);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<size_t> open;
  for (const auto& [ts, i] : order) {
    if (events[i]["ph"] == "B") {
      open.push_back(i);
      continue;
    }
    if (open.empty()) return BadEvent{i, describe(events, i) + ": \"E\" without an open \"B\""};
    const std::string& name = events[i]["name"].get_ref<const std::string&>();
    if (!name.empty() && name != events[open.back()]["name"]) {
      return BadEvent{i, fmt::format("{}: \"E\" does not close the innermost open {}",
                                     describe(events, i), describe(events, open.back()))};
    }
    open.pop_back();
  }
  if (!open.empty()) {
    return BadEvent{open.front(),
                    describe(events, open.front()) + ": \"B\" never closed by an \"E\""};
  }
  return std::nullopt;
}

Result<json> read_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io(fmt::format("[trace] {}: cannot open: {}", path, errno_str()));
  json doc = json::parse(in, nullptr, false);
  if (doc.is_discarded()) return Status::corrupt(fmt::format("[trace] {}: not valid JSON", path));
  return doc;
}

const json* event_array(const json& doc) {
  if (doc.is_array()) return &doc;  // the JSON Array Format
  if (doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array()) {
    return &doc["traceEvents"];
  }
  return nullptr;
}

// validate_trace's message without the "[trace] " prefix.
std::optional<std::string> find_problem(const json& doc) {
  const json* events = event_array(doc);
  if (!events) return "not a trace: expected {\"traceEvents\":[...]} or an array";
  std::optional<BadEvent> first;
  auto keep_first = [&](std::optional<BadEvent> b) {
    if (b && (!first || b->index < first->index)) first = std::move(b);
  };
  // Per (pid, tid): indices of its X events and of its B/E events.
  std::map<std::pair<int64_t, int64_t>, std::pair<std::vector<size_t>, std::vector<size_t>>>
      threads;
  for (size_t i = 0; i < events->size(); ++i) {
    // A malformed event is reported before any nesting problem: nesting
    // cannot be judged with an event missing.
    if (auto bad = check_fields(*events, i)) return bad->message;
    const json& e = (*events)[i];
    const std::string& ph = e["ph"].get_ref<const std::string&>();
    auto key = std::make_pair(e["pid"].get<int64_t>(), e["tid"].get<int64_t>());
    if (ph == "X") threads[key].first.push_back(i);
    if (ph == "B" || ph == "E") threads[key].second.push_back(i);
  }
  for (auto& [key, lists] : threads) {
    keep_first(check_complete_nesting(*events, lists.first));
    keep_first(check_begin_end(*events, lists.second));
  }
  if (first) return first->message;
  return std::nullopt;
}

}  // namespace

Status write_rank_trace(const std::string& path, int rank, const std::string& label,
                        const std::vector<trace::Event>& events) {
  return write_rank_trace(path, rank, label, events, trace::thread_names());
}

Status write_rank_trace(const std::string& path, int rank, const std::string& label,
                        const std::vector<trace::Event>& events,
                        const std::vector<std::pair<int, std::string>>& thread_names) {
  std::map<int, std::string> names(thread_names.begin(), thread_names.end());
  std::set<int> tids;
  for (const auto& e : events) tids.insert(e.tid);

  std::string out = "{\"traceEvents\":[\n";
  const std::string process =
      label.empty() ? fmt::format("rank {}", rank) : fmt::format("rank {} ({})", rank, label);
  out += metadata_event("process_name", rank, 0, process);
  for (int tid : tids) {
    auto it = names.find(tid);
    out += ",\n" + metadata_event("thread_name", rank, tid,
                                  it != names.end() ? it->second : fmt::format("thread {}", tid));
  }
  NameCache cache;
  out.reserve(out.size() + events.size() * 110);
  for (const auto& e : events) {
    const std::string& name = cache.get(e.name);
    const std::string& cat = cache.get(e.cat);
    const double ts_us = e.ts_ns * 1e-3;
    if (e.ph == 'C') {
      fmt::format_to(std::back_inserter(out),
                     ",\n{{\"name\":{},\"cat\":{},\"ph\":\"C\",\"ts\":{:.3f},\"pid\":{},\"tid\":{},"
                     "\"args\":{{\"value\":{}}}}}",
                     name, cat, ts_us, rank, e.tid, e.value);
    } else {
      fmt::format_to(
          std::back_inserter(out),
          ",\n{{\"name\":{},\"cat\":{},\"ph\":\"X\",\"ts\":{:.3f},\"dur\":{:.3f},\"pid\":{},"
          "\"tid\":{}}}",
          name, cat, ts_us, e.dur_ns * 1e-3, rank, e.tid);
    }
  }
  out += "\n],\"displayTimeUnit\":\"ms\"}\n";
  Status s = write_file_atomic(path, out);
  if (!s.is_ok()) return Status::io("[trace] writing " + path + ": " + s.message());
  return Status::ok();
}

Status merge_traces(const std::vector<std::string>& rank_files, const std::string& out) {
  if (rank_files.empty()) return Status::invalid("[trace] merge into " + out + ": no rank files");
  json metadata = json::array();
  std::vector<json> others;
  std::map<int64_t, std::string> pid_file;  // which file each pid came from
  for (const auto& path : rank_files) {
    auto doc = read_trace(path);
    if (!doc.is_ok()) return doc.status();
    if (auto problem = find_problem(*doc)) {
      return Status::corrupt("[trace] merge: " + path + ": " + *problem);
    }
    json& events = doc->is_array() ? *doc : (*doc)["traceEvents"];
    std::set<int64_t> pids;
    for (const auto& e : events) pids.insert(e["pid"].get<int64_t>());
    for (int64_t pid : pids) {
      auto [it, fresh] = pid_file.emplace(pid, path);
      if (!fresh) {
        return Status::invalid(
            fmt::format("[trace] merge: {}: pid {} already in {}", path, pid, it->second));
      }
    }
    for (auto& e : events) {
      if (e["ph"] == "M") {
        metadata.push_back(std::move(e));
      } else {
        others.push_back(std::move(e));
      }
    }
  }
  std::stable_sort(others.begin(), others.end(), [](const json& a, const json& b) {
    const int64_t pa = a["pid"], pb = b["pid"];
    if (pa != pb) return pa < pb;
    return a["ts"].get<double>() < b["ts"].get<double>();
  });
  for (auto& e : others) metadata.push_back(std::move(e));
  json merged = {{"traceEvents", std::move(metadata)}, {"displayTimeUnit", "ms"}};
  Status s = write_file_atomic(out, merged.dump() + "\n");
  if (!s.is_ok()) return Status::io("[trace] merge into " + out + ": " + s.message());
  return Status::ok();
}

Status validate_trace(const json& doc) {
  if (auto problem = find_problem(doc)) return Status::corrupt("[trace] " + *problem);
  return Status::ok();
}

Status validate_trace_file(const std::string& path) {
  auto doc = read_trace(path);
  if (!doc.is_ok()) return doc.status();
  if (auto problem = find_problem(*doc))
    return Status::corrupt("[trace] " + path + ": " + *problem);
  return Status::ok();
}

}  // namespace crucible::profile
