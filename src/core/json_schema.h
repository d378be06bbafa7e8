// Checking a JSON document that crucible wrote (plan.json, probe.json,
// metrics.jsonl rows) before anything uses it: each field's type
// and range, so a damaged or hand-edited file is refused with one line that
// names the file and the field instead of a json::type_error, an infinity in
// a prediction, or a file the next reader refuses. Each format has one check
// function built from these calls (profile/probe_schema.h for probe.json,
// profile/run_schema.h for plan.json, metrics.jsonl rows and the report's
// other inputs); after it passes, its readers may .get<T>() the checked
// fields. trace.json keeps its own check, profile::validate_trace.
//
// Fields are named by dotted paths from the checked value ("compute.peak.
// clock_ghz"); elements of arrays are checked through each(), whose callback
// gets a JsonSchema that prefixes "gemm[3]." to its names. A member that is
// absent passes unless it is required; an intermediate object on the path
// that is absent makes the field absent, one of another type is the error.
// Numbers must be finite and inside [lo, hi] (1e308 parses; a NaN or an
// infinity computed in memory is checked too; nlohmann writes them as null
// and refuses 1e999 when parsing). Messages:
//   "[report] runs/x/plan.json: breakdown must be an object"
//   "[plan] probe.json: compute.gemm[3].gflops = 1e+308 is out of range [0, 1e+08]"
// Immutable after construction; thread-compatible.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace crucible {

class JsonSchema {
 public:
  enum Need { kOptional, kRequired };

  // op: "[report]"; source: the file, as the user named it.
  JsonSchema(std::string op, std::string source, std::string prefix = "")
      : op_(std::move(op)), source_(std::move(source)), prefix_(std::move(prefix)) {}

  // "[op] source: prefix.field why".
  Status bad(const std::string& field, const std::string& why) const;

  Status object(const nlohmann::json& j, const std::string& path, Need need = kOptional) const;
  Status array(const nlohmann::json& j, const std::string& path, Need need = kOptional) const;
  Status string(const nlohmann::json& j, const std::string& path, Need need = kOptional) const;
  Status boolean(const nlohmann::json& j, const std::string& path, Need need = kOptional) const;
  // A finite number (integer or floating) in [lo, hi].
  Status number(const nlohmann::json& j, const std::string& path, double lo, double hi,
                Need need = kOptional) const;
  // An integer in [lo, hi] (a floating-point value is not one).
  Status integer(const nlohmann::json& j, const std::string& path, int64_t lo, int64_t hi,
                 Need need = kOptional) const;
  // The array at `path` (absent: nothing to check unless required), each
  // element checked by `fn` with a schema naming it "path[i]".
  Status each(const nlohmann::json& j, const std::string& path,
              const std::function<Status(const nlohmann::json& element, const JsonSchema& at)>& fn,
              Need need = kOptional) const;
  // The object at `path`, checked by `fn` with a schema naming it "path."
  Status within(const nlohmann::json& j, const std::string& path,
                const std::function<Status(const nlohmann::json& member, const JsonSchema& at)>& fn,
                Need need = kOptional) const;

 private:
  // The value at `path`: *out null when absent; an error when the path
  // crosses a value that is not an object.
  Status find(const nlohmann::json& j, const std::string& path, const nlohmann::json** out) const;
  Status present(const nlohmann::json& j, const std::string& path, Need need,
                 const nlohmann::json** out) const;

  std::string op_, source_, prefix_;
};

}  // namespace crucible
