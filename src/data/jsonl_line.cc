#include "data/jsonl_line.h"

#include <simdjson.h>

#include "data/corpus.h"
#include "data/curate_internal.h"

namespace crucible::data {

struct JsonlLine::Parser {
  simdjson::ondemand::parser p;
};

JsonlLine::JsonlLine() : parser_(std::make_unique<Parser>()) {}
JsonlLine::~JsonlLine() = default;

bool JsonlLine::parse(std::string_view line, size_t room) {
  text.clear(), prefix = "{", suffix.clear(), error.clear();
  repaired = 0;
  std::string copy;
  if (room < line.size() + simdjson::SIMDJSON_PADDING) {
    copy.reserve(line.size() + simdjson::SIMDJSON_PADDING);
    copy.assign(line);
    line = copy;
    room = copy.capacity();
  }
  if (!simdjson::validate_utf8(line.data(), line.size())) {
    // Repair first, as read_corpus does: a few bad bytes should not fail a corpus.
    copy = sanitize_utf8(line, &repaired);
    copy.reserve(copy.size() + simdjson::SIMDJSON_PADDING);
    line = copy;
    room = copy.capacity();
  }
  simdjson::ondemand::document doc;
  simdjson::ondemand::object obj;
  std::string_view whole;
  if (parser_->p.iterate(simdjson::padded_string_view(line.data(), line.size(), room)).get(doc) ||
      doc.get_object().get(obj) || obj.raw_json().get(whole))
    return fail();
  // Nothing but spaces may follow the object on its line.
  const size_t after = size_t(whole.data() - line.data()) + whole.size();
  if (line.find_first_not_of(" \t\r", after) != std::string_view::npos) return fail();
  bool rewound = false;
  if (obj.reset().get(rewound)) return fail();
  bool seen_text = false;
  for (auto field : obj) {
    std::string_view key;
    simdjson::ondemand::value value;
    if (field.unescaped_key().get(key) || field.value().get(value)) return fail();
    if (key == "text" && !seen_text) {
      std::string_view t;
      if (value.get_string().get(t)) {
        error = "\"text\" is not a valid JSON string (a lone surrogate such as \\ud800, or a bad escape)";
        return false;
      }
      text = t;
      seen_text = true;
      continue;
    }
    std::string_view raw;
    simdjson::ondemand::json_type type;
    if (value.type().get(type)) return fail();
    if (type == simdjson::ondemand::json_type::object) {
      simdjson::ondemand::object o;
      if (value.get_object().get(o) || o.raw_json().get(raw)) return fail();
    } else if (type == simdjson::ondemand::json_type::array) {
      simdjson::ondemand::array a;
      if (value.get_array().get(a) || a.raw_json().get(raw)) return fail();
    } else {
      raw = value.raw_json_token();
    }
    while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\t' || raw.back() == '\r')) raw.remove_suffix(1);
    std::string& out = seen_text ? suffix : prefix;
    if (seen_text) out += ',';
    append_json_string(&out, key);
    out += ':';
    out += raw;
    if (!seen_text) out += ',';
  }
  if (!seen_text) return fail();
  suffix += '}';
  return true;
}

bool JsonlLine::fail() {
  error = "expected a JSON object with a string field \"text\"";
  return false;
}

}  // namespace crucible::data
