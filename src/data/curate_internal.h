// Internals shared by the curate_*.cc files: the record formats of the
// intermediates (docs/formats.md, "Curation intermediates") and per-stage
// counters.
#pragma once
#include <cstdint>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/hash.h"
#include "core/status.h"

namespace crucible::data {

inline uint64_t doc_id(size_t chunk, size_t index) { return uint64_t(chunk) << 32 | index; }
inline size_t id_chunk(uint64_t id) { return size_t(id >> 32); }
inline size_t id_index(uint64_t id) { return size_t(id & 0xffffffffu); }

// chunk-C.keys records: sorted by (key, id).
struct KeyRecord {
  uint64_t key, id;
  bool operator<(const KeyRecord& o) const { return key != o.key ? key < o.key : id < o.id; }
};
// part-P.edges records: b is linked to a (a < b).
struct EdgeRecord {
  uint64_t a, b;
  uint32_t kind;  // DupKind
  float similarity;
};
static_assert(sizeof(KeyRecord) == 16 && sizeof(EdgeRecord) == 24);

inline constexpr size_t kSigsPerSection = 256;  // documents per chunk-C.sigs section

// A key's partition: its top bits, so partitions are key ranges.
inline int key_partition(uint64_t key, int partitions) {
  return int((unsigned __int128)key * unsigned(partitions) >> 64);
}

// chunk-C.docs record: u32 lengths, then the bytes, for text, source ("path@offset")
// and fields (JSONL: the object's members before and after "text", as JSON text
// to put around the escaped text: prefix + "\"text\":" + text + suffix).
struct DocView {
  std::string_view text, source, prefix, suffix;
};
void append_doc(std::string* out, const DocView& d);
// Appends the JSON string literal of valid UTF-8 text (curate_output.cc):
// the one escaper of the curation hot path (shard text, JSONL member names).
void append_json_string(std::string* out, std::string_view s);

// Reads the record at *pos and advances it; corrupt if it runs past the end.
Status next_doc(std::string_view buf, size_t* pos, DocView* d, const std::string& path);

struct StageStats {
  uint64_t docs_in = 0, bytes_in = 0, docs_out = 0, bytes_out = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> removed;  // rule -> (docs, bytes)
  nlohmann::json examples = nlohmann::json::object();  // rule -> first few removed

  void pass(uint64_t bytes_before, uint64_t bytes_after) {
    ++docs_in, bytes_in += bytes_before, ++docs_out, bytes_out += bytes_after;
  }
  // Counts a removal; keeps it as an example while its rule has fewer than `max_examples`.
  void remove(std::string_view rule, uint64_t bytes, int max_examples, nlohmann::json example);
  void merge(const StageStats& o, int max_examples);
  nlohmann::json to_json() const;
  static StageStats from_json(const nlohmann::json& j);
};

// The first `max_bytes` of a text, cut on a UTF-8 character boundary ("…" appended when cut).
std::string snippet(std::string_view text, size_t max_bytes = 280);

}  // namespace crucible::data
