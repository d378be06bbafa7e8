#include "core/json_schema.h"

#include <cmath>
#include <cstdio>

namespace crucible {

namespace {

using nlohmann::json;

std::string fmt(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

const char* kind_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    default:
      return "not a JSON value";
  }
}

}  // namespace

Status JsonSchema::bad(const std::string& field, const std::string& why) const {
  std::string name = prefix_ + field;
  if (!name.empty() && name.back() == '.') name.pop_back();
  return Status::invalid(op_ + " " + source_ + ": " + (name.empty() ? "the document" : name) + " " +
                         why);
}

Status JsonSchema::find(const json& j, const std::string& path, const json** out) const {
  const json* p = &j;
  size_t start = 0;
  while (start <= path.size() && !path.empty()) {
    const size_t dot = path.find('.', start);
    const std::string key =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!p->is_object())
      return bad(path.substr(0, start == 0 ? 0 : start - 1), "must be an object");
    auto it = p->find(key);
    if (it == p->end()) {
      *out = nullptr;
      return Status::ok();
    }
    p = &*it;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  *out = p;
  return Status::ok();
}

Status JsonSchema::present(const json& j, const std::string& path, Need need,
                           const json** out) const {
  CRUCIBLE_RETURN_IF_ERROR(find(j, path, out));
  if (!*out && need == kRequired) return bad(path, "is missing");
  return Status::ok();
}

Status JsonSchema::object(const json& j, const std::string& path, Need need) const {
  const json* v;
  CRUCIBLE_RETURN_IF_ERROR(present(j, path, need, &v));
  if (v && !v->is_object())
    return bad(path, std::string("must be an object, not ") + kind_name(*v));
  return Status::ok();
}

Status JsonSchema::array(const json& j, const std::string& path, Need need) const {
  const json* v;
  CRUCIBLE_RETURN_IF_ERROR(present(j, path, need, &v));
  if (v && !v->is_array()) return bad(path, std::string("must be an array, not ") + kind_name(*v));
  return Status::ok();
}

Status JsonSchema::string(const json& j, const std::string& path, Need need) const {
  const json* v;
  CRUCIBLE_RETURN_IF_ERROR(present(j, path, need, &v));
  if (v && !v->is_string()) return bad(path, std::string("must be a string, not ") + kind_name(*v));
  return Status::ok();
}

Status JsonSchema::boolean(const json& j, const std::string& path, Need need) const {
  const json* v;
  CRUCIBLE_RETURN_IF_ERROR(present(j, path, need, &v));
  if (v && !v->is_boolean())
    return bad(path, std::string("must be true or false, not ") + kind_name(*v));
  return Status::ok();
}

Status JsonSchema::number(const json& j, const std::string& path, double lo, double hi,
                          Need need) const {
  const json* v;
  CRUCIBLE_RETURN_IF_ERROR(present(j, path, need, &v));
  if (!v) return Status::ok();
  if (!v->is_number()) return bad(path, std::string("must be a number, not ") + kind_name(*v));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    return bad(path, "= " + fmt(x) + " is out of range [" + fmt(lo) + ", " + fmt(hi) + "]");
  return Status::ok();
}

Status JsonSchema::integer(const json& j, const std::string& path, int64_t lo, int64_t hi,
                           Need need) const {
  const json* v;
  CRUCIBLE_RETURN_IF_ERROR(present(j, path, need, &v));
  if (!v) return Status::ok();
  if (!v->is_number_integer())
    return bad(path, std::string("must be an integer, not ") + kind_name(*v));
  const bool too_big = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX);
  const int64_t x = too_big ? INT64_MAX : v->get<int64_t>();
  if (too_big || x < lo || x > hi)
    return bad(path, "= " + v->dump() + " is out of range [" + std::to_string(lo) + ", " +
                         std::to_string(hi) + "]");
  return Status::ok();
}

Status JsonSchema::each(const json& j, const std::string& path,
                        const std::function<Status(const json&, const JsonSchema&)>& fn,
                        Need need) const {
  CRUCIBLE_RETURN_IF_ERROR(array(j, path, need));
  const json* v;
  CRUCIBLE_RETURN_IF_ERROR(find(j, path, &v));
  if (!v) return Status::ok();
  for (size_t i = 0; i < v->size(); ++i)
    CRUCIBLE_RETURN_IF_ERROR(
        fn((*v)[i], JsonSchema(op_, source_, prefix_ + path + "[" + std::to_string(i) + "].")));
  return Status::ok();
}

Status JsonSchema::within(const json& j, const std::string& path,
                          const std::function<Status(const json&, const JsonSchema&)>& fn,
                          Need need) const {
  CRUCIBLE_RETURN_IF_ERROR(object(j, path, need));
  const json* v;
  CRUCIBLE_RETURN_IF_ERROR(find(j, path, &v));
  if (!v) return Status::ok();
  return fn(*v, JsonSchema(op_, source_, prefix_ + path + "."));
}

}  // namespace crucible
