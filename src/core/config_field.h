// A config key bound to where its value lives: the unit of every config
// schema (runtime/config_schema.h walks lists of these to parse TOML, apply
// `--set key=value`, and write the resolved config back). A layer that owns a
// config struct (sim's workloads, runtime's training config) declares its
// keys as Fields; only runtime parses them, so no layer below it needs TOML.
#pragma once
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace crucible::config {

using StringList = std::vector<std::string>;
using DoubleList = std::vector<double>;  // e.g. risk.var_levels = [0.99, 0.999]
using Target = std::variant<int*, int64_t*, uint64_t*, double*, std::string*, StringList*, bool*, DoubleList*>;

struct Field {
  const char* key;  // "section.name" (static string)
  Target target;
};

}  // namespace crucible::config
