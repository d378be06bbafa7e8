// Reading JSON that came from a file: never an exception. nlohmann::json's
// value()/get<T>() throw type_error on a member of the wrong type (a manifest
// whose "world" is a string, a metrics row whose "step" is "x"); these return
// the default instead, and read_json names the file when it does not parse.
// Thread-compatible (pure functions).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace crucible {

// The file parsed; invalid (naming the file) when it cannot be read or parsed.
Result<nlohmann::json> read_json(const std::string& path);

// obj[key] when obj is an object holding a value of that kind, else `def`.
int64_t json_int_or(const nlohmann::json& obj, const char* key, int64_t def);
std::string json_string_or(const nlohmann::json& obj, const char* key, const std::string& def);
// An object member that must be an object (or absent): the member, else null.
const nlohmann::json& json_object_or_null(const nlohmann::json& obj, const char* key);

}  // namespace crucible
