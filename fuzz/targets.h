// Fuzz targets: each takes bytes an attacker or a broken disk could hand
// crucible and feeds them to one reader the way crucible reads them. The
// contract under test is the bad-input one: any input ends in a Status (or a
// result), never a crash, an uncaught exception, an undefined behaviour or a
// hang. Where a reader has a property stronger than "does not crash", the
// target checks it too (the config's fixed point).
//
// Built two ways: into libFuzzer binaries (fuzz/driver.cc, clang,
// -fsanitize=fuzzer,address,undefined; scripts/fuzz.sh), and into the unit
// tests, which replay every committed input (fuzz/corpus/NAME/*) with GCC
// (tests/fuzz/replay_test.cc).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace crucible::fuzz {

using Target = int (*)(const uint8_t* data, size_t size);

// TOML config; the text after a line "--set" is one override per line.
int config(const uint8_t* data, size_t size);
// safetensors file (ckpt::read_safetensors).
int safetensors(const uint8_t* data, size_t size);
// A checkpoint's manifest.json, its self-checksum made valid so the member
// checks are reached, then every consumer of its members.
int manifest(const uint8_t* data, size_t size);
// A token shard (header and payload), opened with verification.
int shard(const uint8_t* data, size_t size);
// A checked file (core/checked_file.h): every section read and verified.
int checked_file(const uint8_t* data, size_t size);
// One JSONL line as `crucible curate` parses it, and a JSONL file as
// read_corpus reads it.
int jsonl(const uint8_t* data, size_t size);
// A fortunes file: split into fortunes, each sanitised.
int fortunes(const uint8_t* data, size_t size);
// A probe.json: the schema check (profile/probe_schema.h), then every
// reader of a probe document; a cluster made from it must read back.
int probe(const uint8_t* data, size_t size);
// A run's plan.json: the schema check, then the report that reads it.
int plan_json(const uint8_t* data, size_t size);
// A run's trace.json: validate_trace, then the report's pipeline timeline.
int trace(const uint8_t* data, size_t size);
// A cluster.toml (plan::parse_cluster); what parses is written and read
// back, and the second writing is a fixed point.
int cluster(const uint8_t* data, size_t size);

struct NamedTarget {
  const char* name;
  Target fn;
};
// Every target, by the name of its corpus directory.
const std::vector<NamedTarget>& all_targets();

}  // namespace crucible::fuzz
