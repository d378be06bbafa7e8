// Which machine a probe document describes, and whether that is this one.
//
// probe.json records the machine it measured ("machine": CPU vendor, model
// name, family/model/stepping, the flags that decide kernels and ceilings,
// hardware threads, memory, hostname, kernel, and a fingerprint of all but
// the kernel). A run consults a probe document only when its fingerprint is
// this machine's and it is young enough: a probe.json copied from another
// machine once set every prediction and MFU of a checkout (+48% step time).
// Reads /proc and uname only; thread-safe.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace crucible::profile {

// This machine: {vendor, model_name, family, model, stepping, flags [..],
// hardware_threads, memory_bytes, hostname, kernel, fingerprint (16 hex)}.
nlohmann::json machine_identity();

// The fingerprint of an identity object: xxh64 of every field but kernel
// (a kernel update does not change what the hardware does).
std::string machine_fingerprint(const nlohmann::json& identity);

// A short description for messages: "host vm, AMD EPYC (family 25 model 17), 2 threads".
std::string describe_machine(const nlohmann::json& identity);

// ok when `probe` was made on this machine (its machine.fingerprint equals
// `here`'s) and is at most max_age_days old (its "created" stamp); else
// invalid with the reason, for a one-line message.
Status probe_made_here(const nlohmann::json& probe, const nlohmann::json& here, double max_age_days);

}  // namespace crucible::profile
