// Curation: the mechanisms of `crucible curate` (the orchestration over ranks
// and threads is runtime/curate.h). docs/curation.md describes the stages and
// their defaults; docs/formats.md the files.
//
// The corpus is cut into chunks: runs of whole documents, about chunk_mb of
// input each, on document boundaries, planned from the input files alone (so
// the plan, and therefore the output, does not depend on ranks or threads).
// A document's id is chunk << 32 | its index among the chunk's survivors of
// the per-document filters, so ids ascend in input order and "keep the
// smallest id" keeps the first occurrence.
//
// Passes, each over bounded memory, each writing checked files (core/
// checked_file.h) into OUT/.work that the next pass verifies before use:
//   1. scan (per chunk): read, repair UTF-8, clean (NFC + whitespace), Gopher
//      quality, Gopher repetition, C4; then for each survivor its exact-text
//      hash, MinHash signature and LSH band keys.
//        chunk-C.docs   surviving documents (cleaned text, source, JSON fields)
//        chunk-C.sigs   32-bit signature fingerprints, 256 documents a section
//        chunk-C.keys   (key, id) records sorted by key: P exact-hash partitions,
//                       then P band-key partitions (a key's partition is its
//                       top bits), one section each
//        chunk-C.stats  per-stage counts and examples (JSON)
//   2. dedup (per partition): gather the partition's sections of every chunk,
//      group equal keys, link each member to the group's smallest id; band-key
//      links are confirmed by the signatures' Jaccard estimate.
//        part-P.edges   (a, b, kind, similarity) records
//   3. resolve: union-find over all edges; every cluster keeps its smallest
//      id; the others are removed (as exact duplicates when an exact-hash edge
//      names them, else as near duplicates).
//   4. output (per chunk): the chunk's survivors that were not removed go to
//      OUT/shard-C.jsonl; chunk-C.out records the shard's checksum and counts.
//   5. report: OUT/report.json (and report.html, by the caller).
// A unit of work (chunk or partition) is done when its files verify; a rerun
// skips it, so an interrupted run resumes where it stopped.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/corpus.h"
#include "data/minhash.h"
#include "data/quality.h"
#include "data/text_clean.h"

namespace crucible::data {

// The switches and sizes of a curation run (config section [curate]).
struct CurateSettings {
  bool nfc = true;               // Unicode normalisation form C
  bool whitespace = true;        // whitespace clean-up
  bool gopher_quality = true;
  bool gopher_repetition = true;
  bool c4 = false;               // C4 line filters (they drop lines from documents)
  bool exact_dedup = true;
  bool near_dedup = true;
  double chunk_mb = 16;          // input bytes per work unit (and per output shard)
  double memory_mb = 2048;       // budget that sizes the dedup partitions
  int partitions = 0;            // dedup key partitions; 0: from memory_mb
  int threads = 0;               // 0: all cores (under launch: cores / ranks on the host)
  int examples = 5;              // removed documents shown per rule in the report
  bool keep_work = false;        // keep OUT/.work (the intermediates) after success
};

struct CurateSpec {
  std::vector<std::string> inputs;
  std::string format = "auto";   // auto | fortunes | text | jsonl
  std::string profile = "web";   // resolved threshold profile, for the report
  CurateSettings settings;
  GopherQualityParams quality;
  GopherRepetitionParams repetition;
  C4Params c4;
  MinHashParams near;
  // Everything that decides the output (thresholds, switches, sizes), as JSON:
  // part of the plan fingerprint and of the report.
  nlohmann::json to_json() const;
};

struct InputFile {
  std::string path;
  CorpusFormat format = CorpusFormat::kText;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

// Bytes [begin, end) of input file `file`, starting and ending on document boundaries.
struct Segment {
  uint32_t file = 0;
  uint64_t begin = 0, end = 0;
};

struct Chunk {
  std::vector<Segment> segments;
  uint64_t bytes = 0;
};

struct CurationPlan {
  std::vector<InputFile> files;
  std::vector<Chunk> chunks;
  int partitions = 16;
  uint64_t input_bytes = 0;
  double sampled_doc_bytes = 0;  // mean document size in the first chunk (estimates)
  std::string fingerprint;       // hash of the plan and the spec: a resumed run must match
  nlohmann::json to_json() const;
};

// The input files `inputs` name (the walk of list_corpus_files), each with its
// size, mtime and format ("auto": detected from its name and first 64 KiB).
Result<std::vector<InputFile>> list_inputs(const std::vector<std::string>& inputs,
                                           const std::string& format);

// Lists and sizes the inputs, cuts them into chunks, picks the partition count.
Result<CurationPlan> plan_curation(const CurateSpec& spec);

// What a run will need, from the plan (`crucible curate --dry-run`).
struct CurateEstimate {
  uint64_t documents = 0;     // estimated from the sampled mean document size
  uint64_t peak_memory = 0;   // bytes, all threads of one rank together
  uint64_t work_disk = 0;     // OUT/.work at its largest
  uint64_t output_disk = 0;   // the shards (at most the cleaned input)
  nlohmann::json detail;      // per pass
};
CurateEstimate estimate_curation(const CurateSpec& spec, const CurationPlan& plan, int threads);

// File names under OUT (and OUT/.work).
struct CurateLayout {
  std::string out, work;
  explicit CurateLayout(const std::string& out_dir);
  std::string plan() const;
  std::string docs(size_t chunk) const;
  std::string sigs(size_t chunk) const;
  std::string keys(size_t chunk) const;
  std::string stats(size_t chunk) const;
  std::string chunk_out(size_t chunk) const;
  std::string edges(int partition) const;
  std::string shard_name(size_t chunk) const;  // relative to out
  std::string shard(size_t chunk) const;
};

enum class DupKind : uint32_t { kExact = 1, kNear = 2 };

struct Removal {
  uint64_t id = 0;
  uint64_t keeper = 0;      // the cluster's representative (smallest id)
  DupKind kind = DupKind::kExact;
  float similarity = 1;     // estimated Jaccard to the document it was linked with
};

// Pass 1 for one chunk. Idempotent; writes the four chunk files.
Status scan_chunk(const CurateSpec& spec, const CurationPlan& plan, const MinHasher& hasher,
                  size_t chunk, const CurateLayout& layout);
// True when the chunk's scan files exist and verify. A file that exists but
// fails verification is removed and named in *problem (to be recomputed).
bool scan_done(const CurationPlan& plan, size_t chunk, const CurateLayout& layout,
               std::string* problem);

// Pass 2 for one partition.
Status dedup_partition(const CurateSpec& spec, const CurationPlan& plan, int partition,
                       const CurateLayout& layout);
bool dedup_done(int partition, const CurateLayout& layout, std::string* problem);

// Pass 3: the removed documents, sorted by id.
Result<std::vector<Removal>> resolve_duplicates(const CurationPlan& plan,
                                                const CurateLayout& layout);

// Pass 4 for one chunk.
Status write_output(const CurateSpec& spec, const CurationPlan& plan, size_t chunk,
                    const std::vector<Removal>& removed, const CurateLayout& layout);
bool output_done(size_t chunk, const CurateLayout& layout, std::string* problem);

// Pass 5: aggregates every chunk's stats into the report (schema
// "crucible-curate/1"; docs/formats.md). `run` holds timings and the like.
Result<nlohmann::json> build_report(const CurateSpec& spec, const CurationPlan& plan,
                                    const CurateLayout& layout, const nlohmann::json& run);

// "9 documents, 1.2 MB -> ..." summary lines of a report, for the terminal.
std::vector<std::string> report_summary(const nlohmann::json& report);

}  // namespace crucible::data
