// Curation passes 4 and 5: write each chunk's kept documents as a JSONL shard,
// then aggregate the per-chunk counters into report.json.
#include <xxhash.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/checked_file.h"
#include "core/file_io.h"
#include "data/curate.h"
#include "data/curate_internal.h"

namespace crucible::data {

using nlohmann::json;

// Quotes, backslashes and control characters escaped, everything else copied
// (what nlohmann's dump writes, without building a json value: this runs over
// every output byte).
void append_json_string(std::string* out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out->push_back('"');
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = uint8_t(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s.data() + start, i - start);
    start = i + 1;
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\t': out->append("\\t"); break;
      case '\r': out->append("\\r"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      default: {
        const char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        out->append(u, 6);
      }
    }
  }
  out->append(s.data() + start, s.size() - start);
  out->push_back('"');
}

void StageStats::remove(std::string_view rule, uint64_t bytes, int max_examples, json example) {
  ++docs_in, bytes_in += bytes;
  auto& r = removed[std::string(rule)];
  ++r.first, r.second += bytes;
  json& list = examples[std::string(rule)];
  if (!list.is_array()) list = json::array();
  if (int(list.size()) < max_examples) list.push_back(std::move(example));
}

void StageStats::merge(const StageStats& o, int max_examples) {
  docs_in += o.docs_in, bytes_in += o.bytes_in, docs_out += o.docs_out, bytes_out += o.bytes_out;
  for (const auto& [rule, v] : o.removed) {
    auto& r = removed[rule];
    r.first += v.first, r.second += v.second;
  }
  for (const auto& [rule, list] : o.examples.items()) {
    json& mine = examples[rule];
    if (!mine.is_array()) mine = json::array();
    for (const auto& e : list)
      if (int(mine.size()) < max_examples) mine.push_back(e);
  }
}

json StageStats::to_json() const {
  json rules = json::object();
  for (const auto& [rule, v] : removed) rules[rule] = {{"docs", v.first}, {"bytes", v.second}};
  return {{"docs_in", docs_in},   {"bytes_in", bytes_in}, {"docs_out", docs_out},
          {"bytes_out", bytes_out}, {"removed", rules},    {"examples", examples}};
}

StageStats StageStats::from_json(const json& j) {
  StageStats s;
  s.docs_in = j.value("docs_in", uint64_t(0));
  s.bytes_in = j.value("bytes_in", uint64_t(0));
  s.docs_out = j.value("docs_out", uint64_t(0));
  s.bytes_out = j.value("bytes_out", uint64_t(0));
  if (j.contains("removed"))
    for (const auto& [rule, v] : j["removed"].items())
      s.removed[rule] = {v.value("docs", uint64_t(0)), v.value("bytes", uint64_t(0))};
  if (j.contains("examples")) s.examples = j["examples"];
  return s;
}

std::string snippet(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t n = max_bytes;
  while (n > 0 && (uint8_t(text[n]) & 0xC0) == 0x80) --n;  // not inside a UTF-8 sequence
  return std::string(text.substr(0, n)) + "\u2026";
}

Status write_output(const CurateSpec& spec, const CurationPlan&, size_t chunk,
                    const std::vector<Removal>& removed, const CurateLayout& layout) {
  auto docs = read_checked(layout.docs(chunk));
  if (!docs) return docs.status();
  const int k = spec.settings.examples;
  auto it = std::lower_bound(removed.begin(), removed.end(), doc_id(chunk, 0),
                             [](const Removal& r, uint64_t id) { return r.id < id; });
  StageStats exact, near;
  std::string shard;
  shard.reserve(docs->size() + docs->size() / 8);
  uint64_t kept = 0, kept_bytes = 0;
  size_t pos = 0;
  for (size_t i = 0; pos < docs->size(); ++i) {
    DocView d;
    CRUCIBLE_RETURN_IF_ERROR(next_doc(*docs, &pos, &d, layout.docs(chunk)));
    const uint64_t id = doc_id(chunk, i);
    while (it != removed.end() && it->id < id) ++it;
    const bool exact_on = spec.settings.exact_dedup, near_on = spec.settings.near_dedup;
    if (it != removed.end() && it->id == id) {
      json ex = {{"source", std::string(d.source)}, {"text", snippet(d.text)},
                 {"keeper", it->keeper}, {"similarity", it->similarity}};
      if (it->kind == DupKind::kExact) {
        exact.remove("exact_dedup.duplicate", d.text.size(), k, ex);
      } else {
        if (exact_on) exact.pass(d.text.size(), d.text.size());
        near.remove("near_dedup.duplicate", d.text.size(), k, ex);
      }
      continue;
    }
    if (exact_on) exact.pass(d.text.size(), d.text.size());
    if (near_on) near.pass(d.text.size(), d.text.size());
    if (d.prefix.empty()) {
      shard += "{\"text\":";
      append_json_string(&shard, d.text);
      shard += ",\"source\":";
      append_json_string(&shard, d.source);
      shard += "}\n";
    } else {
      shard.append(d.prefix);
      shard += "\"text\":";
      append_json_string(&shard, d.text);
      shard.append(d.suffix);
      shard += '\n';
    }
    ++kept, kept_bytes += d.text.size();
  }
  CRUCIBLE_RETURN_IF_ERROR(write_file_atomic(layout.shard(chunk), shard));
  json out = {{"exact_dedup", exact.to_json()},
              {"near_dedup", near.to_json()},
              {"shard",
               {{"file", layout.shard_name(chunk)},
                {"docs", kept},
                {"text_bytes", kept_bytes},
                {"bytes", shard.size()},
                {"xxh3", hex64(XXH3_64bits(shard.data(), shard.size()))}}}};
  return write_checked(layout.chunk_out(chunk), out.dump());
}

bool output_done(size_t chunk, const CurateLayout& layout, std::string* problem) {
  std::error_code ec;
  if (!std::filesystem::exists(layout.chunk_out(chunk), ec)) return false;
  auto rec = read_checked(layout.chunk_out(chunk));
  auto fail = [&](const std::string& why) {
    if (problem) *problem = why;
    std::filesystem::remove(layout.chunk_out(chunk), ec);
    return false;
  };
  if (!rec) return fail(rec.status().message());
  json j = json::parse(*rec, nullptr, false);
  if (j.is_discarded() || !j.contains("shard")) return fail(layout.chunk_out(chunk) + ": not a chunk record");
  std::ifstream in(layout.shard(chunk), std::ios::binary);
  if (!in) return fail(layout.shard(chunk) + " is missing");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (hex64(XXH3_64bits(bytes.data(), bytes.size())) != j["shard"].value("xxh3", ""))
    return fail(layout.shard(chunk) + ": checksum mismatch against " + layout.chunk_out(chunk));
  return true;
}

namespace {

// The text and source of one document of the .docs intermediates (for the
// "duplicate of" side of dedup examples).
json lookup_doc(const CurateLayout& layout, uint64_t id) {
  auto docs = read_checked(layout.docs(id_chunk(id)));
  if (!docs) return nullptr;
  size_t pos = 0;
  DocView d;
  for (size_t i = 0; pos < docs->size(); ++i) {
    if (!next_doc(*docs, &pos, &d, "").is_ok()) return nullptr;
    if (i == id_index(id)) return {{"source", std::string(d.source)}, {"text", snippet(d.text)}};
  }
  return nullptr;
}

}  // namespace

Result<json> build_report(const CurateSpec& spec, const CurationPlan& plan, const CurateLayout& layout,
                          const json& run) {
  const int k = spec.settings.examples;
  StageStats clean, quality, repetition, c4, exact, near;
  uint64_t read_docs = 0, read_bytes = 0, invalid = 0, empty = 0, changed = 0, c4_lines = 0;
  json shards = json::array();
  uint64_t out_docs = 0, out_bytes = 0, out_text = 0;
  for (size_t c = 0; c < plan.chunks.size(); ++c) {
    auto st = read_checked(layout.stats(c));
    if (!st) return st.status();
    auto out = read_checked(layout.chunk_out(c));
    if (!out) return out.status();
    json s = json::parse(*st, nullptr, false), o = json::parse(*out, nullptr, false);
    if (s.is_discarded() || o.is_discarded())
      return Status::corrupt("[curate] chunk " + std::to_string(c) + ": unreadable stats");
    read_docs += s["read"].value("docs", uint64_t(0));
    read_bytes += s["read"].value("bytes", uint64_t(0));
    invalid += s["read"].value("invalid_utf8", uint64_t(0));
    empty += s["read"].value("empty", uint64_t(0));
    changed += s["clean"].value("changed", uint64_t(0));
    c4_lines += s["c4"].value("lines_removed", uint64_t(0));
    clean.merge(StageStats::from_json(s["clean"]), k);
    quality.merge(StageStats::from_json(s["gopher_quality"]), k);
    repetition.merge(StageStats::from_json(s["gopher_repetition"]), k);
    c4.merge(StageStats::from_json(s["c4"]), k);
    exact.merge(StageStats::from_json(o["exact_dedup"]), k);
    near.merge(StageStats::from_json(o["near_dedup"]), k);
    shards.push_back(o["shard"]);
    out_docs += o["shard"].value("docs", uint64_t(0));
    out_text += o["shard"].value("text_bytes", uint64_t(0));
    out_bytes += o["shard"].value("bytes", uint64_t(0));
  }
  // Dedup examples name the document that was kept in their place.
  for (auto* st : {&exact, &near})
    for (auto& [rule, list] : st->examples.items())
      for (auto& e : list)
        if (e.contains("keeper")) {
          e["duplicate_of"] = lookup_doc(layout, e["keeper"].get<uint64_t>());
          e.erase("keeper");
        }
  const auto& s = spec.settings;
  json stages = json::array();
  auto add = [&](const char* name, bool enabled, StageStats& st, json extra) {
    json j = st.to_json();
    j["name"] = name;
    j["enabled"] = enabled;
    for (auto& [key, v] : extra.items()) j[key] = v;
    stages.push_back(j);
  };
  add("clean", s.nfc || s.whitespace, clean, {{"changed_docs", changed}, {"nfc", s.nfc}, {"whitespace", s.whitespace}});
  add("gopher_quality", s.gopher_quality, quality, json::object());
  add("gopher_repetition", s.gopher_repetition, repetition, json::object());
  add("c4", s.c4, c4, {{"lines_removed", c4_lines}});
  add("exact_dedup", s.exact_dedup, exact, json::object());
  add("near_dedup", s.near_dedup, near, json::object());
  json report;
  report["schema"] = "crucible-curate/1";
  report["inputs"] = spec.inputs;
  report["input"] = {{"files", plan.files.size()}, {"bytes", plan.input_bytes}, {"docs", read_docs},
                     {"text_bytes", read_bytes}, {"invalid_utf8_repaired", invalid}, {"empty_skipped", empty}};
  report["output"] = {{"docs", out_docs}, {"text_bytes", out_text}, {"bytes", out_bytes}, {"shards", shards.size()}};
  report["stages"] = stages;
  report["shards"] = shards;
  report["config"] = spec.to_json();
  report["plan"] = {{"chunks", plan.chunks.size()}, {"partitions", plan.partitions}, {"fingerprint", plan.fingerprint}};
  report["run"] = run;
  return report;
}

std::vector<std::string> report_summary(const json& r) {
  auto mb = [](uint64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MB", double(b) / 1e6);
    return std::string(buf);
  };
  std::vector<std::string> lines;
  const json& in = r["input"];
  const json& out = r["output"];
  lines.push_back(std::to_string(in.value("docs", uint64_t(0))) + " documents (" +
                  mb(in.value("text_bytes", uint64_t(0))) + ") in, " + std::to_string(out.value("docs", uint64_t(0))) +
                  " (" + mb(out.value("text_bytes", uint64_t(0))) + ") kept");
  for (const auto& st : r["stages"]) {
    if (!st.value("enabled", false)) continue;
    uint64_t removed = st.value("docs_in", uint64_t(0)) - st.value("docs_out", uint64_t(0));
    std::string line = "  " + st.value("name", std::string()) + ": -" + std::to_string(removed) + " docs";
    std::string rules;
    for (const auto& [rule, v] : st["removed"].items())
      rules += (rules.empty() ? "" : ", ") + rule.substr(rule.find('.') + 1) + " " +
               std::to_string(v.value("docs", uint64_t(0)));
    if (st.contains("changed_docs"))
      rules += (rules.empty() ? "" : ", ") + std::string("text changed in ") +
               std::to_string(st.value("changed_docs", uint64_t(0)));
    if (st.contains("lines_removed"))
      rules += (rules.empty() ? "" : ", ") + std::to_string(st.value("lines_removed", uint64_t(0))) +
               " lines dropped";
    if (!rules.empty()) line += " (" + rules + ")";
    lines.push_back(line);
  }
  return lines;
}

}  // namespace crucible::data
