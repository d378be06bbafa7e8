#include "core/json_io.h"

#include "core/file_io.h"

namespace crucible {

Result<nlohmann::json> read_json(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text.status();
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::invalid(path + ": not valid JSON");
  return j;
}

int64_t json_int_or(const nlohmann::json& obj, const char* key, int64_t def) {
  if (!obj.is_object()) return def;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return def;
  return it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX) ? def : it->get<int64_t>();
}

std::string json_string_or(const nlohmann::json& obj, const char* key, const std::string& def) {
  if (!obj.is_object()) return def;
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : def;
}

const nlohmann::json& json_object_or_null(const nlohmann::json& obj, const char* key) {
  static const nlohmann::json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it != obj.end() && it->is_object() ? *it : kNull;
}

}  // namespace crucible
