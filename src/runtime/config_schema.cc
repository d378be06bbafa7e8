#include "runtime/config_schema.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <locale>
#include <sstream>
#include <variant>

#include "core/format.h"
#include "data/corpus.h"

namespace crucible::runtime::schema {

using config::DoubleList;
using config::StringList;
using config::Target;

namespace {

const char* type_name(const Target& t) {
  if (std::holds_alternative<double*>(t)) return "a number";
  if (std::holds_alternative<std::string*>(t)) return "a string";
  if (std::holds_alternative<StringList*>(t)) return "an array of strings";
  if (std::holds_alternative<DoubleList*>(t)) return "an array of numbers";
  if (std::holds_alternative<bool*>(t)) return "a boolean";
  return "an integer";
}

std::string node_type(const toml::node& node) {
  return std::string(toml::impl::node_type_friendly_names[size_t(node.type())]);
}

// Stores a TOML value into the field, checking its type and range.
Status assign(const Field& f, const toml::node& node) {
  const std::string key = f.key;
  auto wrong_type = [&] { return bad(key, std::string("expected ") + type_name(f.target) + ", got " + node_type(node)); };
  auto number = [](const toml::node& n, double* out) {
    if (n.is_floating_point())
      *out = *n.value<double>();
    else if (n.is_integer())
      *out = double(*n.value<int64_t>());
    else
      return false;
    return true;
  };
  return std::visit(
      [&](auto* dst) -> Status {
        using T = std::remove_pointer_t<decltype(dst)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (!node.is_string()) return wrong_type();
          *dst = *node.value<std::string>();
        } else if constexpr (std::is_same_v<T, StringList>) {
          if (node.is_string()) {  // one path is a list of one
            *dst = {*node.value<std::string>()};
            return Status::ok();
          }
          const toml::array* arr = node.as_array();
          if (!arr) return wrong_type();
          dst->clear();
          for (const auto& el : *arr) {
            if (!el.is_string()) return wrong_type();
            dst->push_back(*el.value<std::string>());
          }
        } else if constexpr (std::is_same_v<T, DoubleList>) {
          double one = 0;
          if (number(node, &one)) {  // one number is a list of one
            *dst = {one};
            return Status::ok();
          }
          const toml::array* arr = node.as_array();
          if (!arr) return wrong_type();
          dst->clear();
          for (const auto& el : *arr) {
            if (!number(el, &one)) return wrong_type();
            dst->push_back(one);
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          if (!node.is_boolean()) return wrong_type();
          *dst = *node.value<bool>();
        } else if constexpr (std::is_same_v<T, double>) {
          if (!number(node, dst)) return wrong_type();
        } else {  // integers
          if (!node.is_integer()) return wrong_type();
          int64_t v = *node.value<int64_t>();
          if (v < int64_t(std::numeric_limits<T>::min()) ||
              (std::is_same_v<T, int> && v > int64_t(std::numeric_limits<int>::max())))
            return bad(key, std::to_string(v) + " is out of range");
          *dst = T(v);
        }
        return Status::ok();
      },
      f.target);
}

const Field* find_field(const std::vector<Field>& fs, const std::string& key) {
  for (const auto& f : fs)
    if (key == f.key) return &f;
  return nullptr;
}

// ", did you mean train.steps?" when `name` is a key of some section.
std::string did_you_mean(const std::vector<Field>& fs, const std::string& name) {
  for (const auto& f : fs) {  // the same last part: "min_words" -> curate.quality.min_words
    std::string key = f.key;
    const std::string last = name.substr(name.rfind('.') + 1);
    if (key.substr(key.rfind('.') + 1) == last) return ", did you mean " + key + "?";
  }
  return "";
}

// True when some key lives under `prefix` ("curate" or "curate.quality").
bool is_section(const std::vector<Field>& fs, const std::string& prefix) {
  for (const auto& f : fs)
    if (std::string(f.key).rfind(prefix + ".", 0) == 0) return true;
  return false;
}

// Walks a table whose path is `prefix` ("" for the document): sub-tables are
// sections, values are keys.
Status apply_at(const std::vector<Field>& fs, const toml::table& tbl, const std::string& prefix,
                const std::string& origin, std::vector<std::string>* explicit_keys) {
  for (const auto& [name, node] : tbl) {
    const std::string path = prefix.empty() ? std::string(name.str()) : prefix + "." + std::string(name.str());
    if (const toml::table* sub = node.as_table()) {
      if (!is_section(fs, path)) {
        if (find_field(fs, path)) return bad(path, "must be a value, not a table (in " + origin + ")");
        return bad(path, "unknown section" + did_you_mean(fs, std::string(name.str())) + " (in " + origin + ")");
      }
      CRUCIBLE_RETURN_IF_ERROR(apply_at(fs, *sub, path, origin, explicit_keys));
      continue;
    }
    if (prefix.empty()) return bad(path, "must be a [section]" + did_you_mean(fs, path) + " (in " + origin + ")");
    const Field* f = find_field(fs, path);
    if (!f) {
      if (is_section(fs, path)) return bad(path, "must be a [" + path + "] table (in " + origin + ")");
      return bad(path, "unknown key" + did_you_mean(fs, std::string(name.str())) + " (in " + origin + ")");
    }
    CRUCIBLE_RETURN_IF_ERROR(assign(*f, node));
    if (explicit_keys) explicit_keys->push_back(path);
  }
  return Status::ok();
}

// The table holding `key`'s value, made on the way ("curate.quality.min_words":
// root[curate][quality]); `name` gets the last part.
toml::table& table_for(toml::table& root, const std::string& key, std::string* name) {
  toml::table* t = &root;
  size_t from = 0;
  for (size_t dot; (dot = key.find('.', from)) != std::string::npos; from = dot + 1) {
    const std::string part = key.substr(from, dot - from);
    if (!t->contains(part)) t->insert(part, toml::table{});
    t = (*t)[part].as_table();
  }
  *name = key.substr(from);
  return *t;
}

// How the toml++ library prints a double (it is built without charconv for
// floats: max_digits10 digits, then ".0" when the text has no point).
std::string toml_float_text(double v) {
  std::ostringstream s;
  s.imbue(std::locale::classic());
  s.precision(std::numeric_limits<double>::max_digits10);
  s << v;
  std::string t = s.str();
  if (t.find_first_of(".eE") == std::string::npos) t += ".0";
  return t;
}

std::string shortest_float_text(double v) {
  std::string t = format_double(v);
  if (t.find_first_of(".eE") == std::string::npos) t += ".0";
  return t;
}

}  // namespace

Status bad(const std::string& key, const std::string& why) { return Status::invalid("[config] " + key + ": " + why); }

Status one_of(const std::string& key, const std::string& value, std::initializer_list<const char*> allowed) {
  std::string names;
  for (const char* a : allowed) {
    if (value == a) return Status::ok();
    names += (names.empty() ? "" : ", ") + std::string(a);
  }
  return bad(key, "'" + value + "' is not one of " + names);
}

Result<toml::table> parse_toml(const std::string& text, const std::string& origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    return Status::invalid("[config] " + origin + ":" + std::to_string(e.source().begin.line) + ": " +
                           std::string(e.description()));
  }
}

Status apply_table(const std::vector<Field>& fields, const toml::table& root, const std::string& origin,
                   std::vector<std::string>* explicit_keys) {
  return apply_at(fields, root, "", origin, explicit_keys);
}

Status apply_override(const std::vector<Field>& fields, const std::string& text,
                      std::vector<std::string>* explicit_keys) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return Status::invalid("[config] --set " + text + ": expected key=value");
  std::string key = text.substr(0, eq), value = text.substr(eq + 1);
  const Field* f = find_field(fields, key);
  if (!f) {
    std::string name = key.substr(key.find('.') + 1);
    return bad(key, "unknown key" + did_you_mean(fields, name) + " (in --set)");
  }
  if (explicit_keys) explicit_keys->push_back(key);
  toml::parse_result parsed;
  bool ok = true;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    ok = false;
  }
  if (ok && parsed["v"].node()) {
    const toml::node& n = *parsed["v"].node();
    bool is_text_target =
        std::holds_alternative<std::string*>(f->target) || std::holds_alternative<StringList*>(f->target);
    if (!is_text_target || n.is_string() || n.is_array()) return assign(*f, n);
  }
  // A bare word is taken as text: it must be text TOML can hold, or the
  // resolved config.toml could not give it back (found by fuzz/targets.cc).
  const bool control =
      std::any_of(value.begin(), value.end(), [](char c) { return (unsigned char)c < 0x20 && c != '\t'; });
  size_t repaired = 0;
  (void)data::sanitize_utf8(value, &repaired);
  if (repaired || control) return bad(key, "the value is not valid UTF-8 text (in --set)");
  if (auto* s = std::get_if<std::string*>(&f->target)) {
    **s = value;
    return Status::ok();
  }
  if (auto* l = std::get_if<StringList*>(&f->target)) {
    (*l)->clear();
    std::stringstream ss(value);
    for (std::string item; std::getline(ss, item, ',');)
      if (!item.empty()) (*l)->push_back(item);
    return Status::ok();
  }
  return bad(key, "'" + value + "' is not " + type_name(f->target) + " (in --set)");
}

std::string to_toml(const std::vector<Field>& fields, const std::string& header) {
  toml::table root;
  // Each double's line as toml++ prints it -> in the shortest text that reads
  // back to the same value (core/format.h): "weight_decay = 0.1".
  std::vector<std::pair<std::string, std::string>> floats;
  for (const auto& f : fields) {
    std::string name;
    toml::table& t = table_for(root, f.key, &name);
    std::visit(
        [&](auto* v) {
          using T = std::remove_pointer_t<decltype(v)>;
          if constexpr (std::is_same_v<T, StringList>) {
            toml::array arr;
            for (const auto& s : *v) arr.push_back(s);
            t.insert(name, std::move(arr));
          } else if constexpr (std::is_same_v<T, DoubleList>) {
            toml::array arr;
            for (double d : *v) arr.push_back(d);
            t.insert(name, std::move(arr));
          } else if constexpr (std::is_same_v<T, uint64_t>) {
            t.insert(name, int64_t(*v));
          } else if constexpr (std::is_same_v<T, double>) {
            t.insert(name, *v);
            if (std::isfinite(*v))
              floats.push_back({name + " = " + toml_float_text(*v) + "\n", name + " = " + shortest_float_text(*v) + "\n"});
          } else {
            t.insert(name, *v);
          }
        },
        f.target);
  }
  std::ostringstream out;
  out << header << root << "\n";
  std::string text = out.str();
  // The same value either way, so a line of another key that happens to read
  // the same is rewritten correctly too.
  for (const auto& [printed, shortest] : floats)
    for (size_t at = 0; (at = text.find(printed, at)) != std::string::npos;) {
      const bool whole_key = at == 0 || text[at - 1] == '\n' || text[at - 1] == ' ' || text[at - 1] == '\t';
      if (!whole_key) {  // "min_lr = ..." when looking for "lr = ..."
        at += printed.size();
        continue;
      }
      text.replace(at, printed.size(), shortest);
      at += shortest.size();
    }
  return text;
}

nlohmann::json to_json(const std::vector<Field>& fields) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : fields) {
    nlohmann::json* at = &j;
    const std::string key = f.key;
    size_t from = 0;
    for (size_t dot; (dot = key.find('.', from)) != std::string::npos; from = dot + 1)
      at = &(*at)[key.substr(from, dot - from)];
    std::visit([&](auto* v) { (*at)[key.substr(from)] = *v; }, f.target);
  }
  return j;
}

}  // namespace crucible::runtime::schema
