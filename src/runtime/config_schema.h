// The one config mechanism: TOML text and `--set key=value` overrides applied
// to a schema (a list of config::Field, core/config_field.h), and the
// resolved values written back as TOML or JSON. runtime/config.cc (training)
// and runtime/sim_config.cc (`crucible sim`) each declare their keys and
// use these functions, so every config reads, errs and resolves alike:
//   - a sub-table is a section ([curate] and [curate.quality] alike), a value
//     a key; unknown sections and keys, wrong types and out-of-range integers
//     are Status::invalid("[config] KEY: why (in ORIGIN)"), with a "did you
//     mean" when another section has a key of that name;
//   - `--set k=v` reads v as TOML when it parses (numbers, booleans, "quoted",
//     [arrays]); a bare word is text, and for list keys a comma-separated list;
//   - to_toml's text, parsed again, gives the same values (doubles in their
//     shortest round-trip form).
// Stateless; thread-compatible (the Fields point into the caller's struct).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "core/config_field.h"
#include "core/status.h"

namespace crucible::runtime::schema {

using config::Field;

// "[config] KEY: why".
Status bad(const std::string& key, const std::string& why);
// Ok when value is one of `allowed`; else bad(key, "'v' is not one of a, b").
Status one_of(const std::string& key, const std::string& value, std::initializer_list<const char*> allowed);

// Parses TOML text; a syntax error is "[config] ORIGIN:LINE: description".
Result<toml::table> parse_toml(const std::string& text, const std::string& origin);
// Stores every value of `root` into its field; appends each key set to
// *explicit_keys (when given).
Status apply_table(const std::vector<Field>& fields, const toml::table& root, const std::string& origin,
                   std::vector<std::string>* explicit_keys = nullptr);
// One "key=value" override.
Status apply_override(const std::vector<Field>& fields, const std::string& text,
                      std::vector<std::string>* explicit_keys = nullptr);

// Every field, as TOML (after `header`, a comment block ending in '\n') and as
// nested JSON objects.
std::string to_toml(const std::vector<Field>& fields, const std::string& header);
nlohmann::json to_json(const std::vector<Field>& fields);

}  // namespace crucible::runtime::schema
