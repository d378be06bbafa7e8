// Curation planning: inputs -> chunks on document boundaries, the partition
// count, the plan fingerprint, the --dry-run estimate, and the file layout.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/file_io.h"
#include "data/curate.h"
#include "data/curate_internal.h"

namespace crucible::data {
namespace {

using nlohmann::json;

const char* format_name(CorpusFormat f) {
  switch (f) {
    case CorpusFormat::kFortunes:
      return "fortunes";
    case CorpusFormat::kJsonl:
      return "jsonl";
    default:
      return "text";
  }
}

Status pread_some(int fd, std::string* buf, size_t n, uint64_t offset, const std::string& path) {
  buf->resize(n);
  auto got = pread_full(fd, buf->data(), n, offset, path);
  if (!got) return Status::io("[curate] " + got.status().message());
  buf->resize(*got);
  return Status::ok();
}

// The first document boundary at or after `target` (the file size if none):
// JSONL documents start after a '\n'; fortunes after a line that is "%".
Result<uint64_t> next_boundary(int fd, const InputFile& f, uint64_t target) {
  if (target >= f.size) return f.size;
  if (f.format == CorpusFormat::kText) return f.size;  // one document per file
  constexpr size_t kWindow = 1 << 16;
  // A boundary at `target` itself needs the byte(s) before it.
  uint64_t pos = target >= 4 ? target - 4 : 0;
  std::string buf;
  while (pos < f.size) {
    CRUCIBLE_RETURN_IF_ERROR(pread_some(fd, &buf, kWindow + 4, pos, f.path));
    if (buf.empty()) break;
    for (size_t i = 0; i < buf.size(); ++i) {
      if (buf[i] != '\n') continue;
      uint64_t after = pos + i + 1;
      if (after < target) continue;
      if (f.format == CorpusFormat::kJsonl) return after;
      // fortunes: the line that ends here must be "%" (or "%\r").
      std::string_view head(buf.data(), i);
      if (head.ends_with("\n%") || head.ends_with("\n%\r") ||
          ((pos + i == 1 || pos + i == 2) && pos == 0 && (head == "%" || head == "%\r")))
        return after;
    }
    if (buf.size() <= 4) break;
    pos += buf.size() - 4;  // overlap: a "\n%\r\n" may straddle windows
  }
  return f.size;
}

// Mean document size of the first `limit` bytes of the corpus (for estimates).
double sample_doc_bytes(const std::vector<InputFile>& files, uint64_t limit) {
  uint64_t bytes = 0, docs = 0;
  for (const auto& f : files) {
    if (bytes >= limit) break;
    int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::string buf;
    Status s = pread_some(fd, &buf, size_t(std::min<uint64_t>(f.size, limit - bytes)), 0, f.path);
    ::close(fd);
    if (!s.is_ok()) continue;
    bytes += buf.size();
    if (f.format == CorpusFormat::kText) {
      ++docs;
    } else if (f.format == CorpusFormat::kJsonl) {
      docs += uint64_t(std::count(buf.begin(), buf.end(), '\n')) + (buf.ends_with('\n') ? 0 : 1);
    } else {
      for_each_fortune(buf, [&](size_t, std::string_view) { ++docs; });
    }
  }
  return docs ? double(bytes) / double(docs) : 1000.0;
}

uint64_t pow2_at_least(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}


}  // namespace

json CurateSpec::to_json() const {
  const auto& s = settings;
  json j;
  j["format"] = format;
  j["profile"] = profile;
  j["stages"] = {{"nfc", s.nfc},
                 {"whitespace", s.whitespace},
                 {"gopher_quality", s.gopher_quality},
                 {"gopher_repetition", s.gopher_repetition},
                 {"c4", s.c4},
                 {"exact_dedup", s.exact_dedup},
                 {"near_dedup", s.near_dedup}};
  j["chunk_mb"] = s.chunk_mb;
  j["memory_mb"] = s.memory_mb;
  j["partitions"] = s.partitions;
  j["examples"] = s.examples;
  const auto& q = quality;
  j["quality"] = {{"min_words", q.min_words},
                  {"max_words", q.max_words},
                  {"min_mean_word_length", q.min_mean_word_length},
                  {"max_mean_word_length", q.max_mean_word_length},
                  {"max_hash_ratio", q.max_hash_ratio},
                  {"max_ellipsis_ratio", q.max_ellipsis_ratio},
                  {"max_bullet_lines", q.max_bullet_lines},
                  {"max_ellipsis_lines", q.max_ellipsis_lines},
                  {"min_alpha_words", q.min_alpha_words},
                  {"min_stop_words", q.min_stop_words}};
  const auto& r = repetition;
  j["repetition"] = {{"max_dup_line_frac", r.max_dup_line_frac},
                     {"max_dup_para_frac", r.max_dup_para_frac},
                     {"max_dup_line_char_frac", r.max_dup_line_char_frac},
                     {"max_dup_para_char_frac", r.max_dup_para_char_frac},
                     {"max_top_ngram", {r.max_top_2gram, r.max_top_3gram, r.max_top_4gram}},
                     {"max_dup_ngram", std::vector<double>(r.max_dup_ngram, r.max_dup_ngram + 6)}};
  j["c4"] = {{"min_words_per_line", c4.min_words_per_line},
             {"min_sentences", c4.min_sentences},
             {"terminal_punct", c4.terminal_punct},
             {"drop_javascript", c4.drop_javascript},
             {"drop_policy", c4.drop_policy},
             {"drop_lorem_ipsum", c4.drop_lorem_ipsum},
             {"drop_curly_bracket", c4.drop_curly_bracket}};
  j["near"] = {{"ngram", near.ngram},         {"bands", near.bands},
               {"rows", near.rows},           {"hash_bits", near.hash_bits},
               {"threshold", near.threshold}, {"seed", near.seed}};
  return j;
}

json CurationPlan::to_json() const {
  json j;
  j["files"] = json::array();
  for (const auto& f : files)
    j["files"].push_back(
        {{"path", f.path}, {"format", format_name(f.format)}, {"size", f.size}, {"mtime_ns", f.mtime_ns}});
  j["chunks"] = json::array();
  for (const auto& c : chunks) {
    json segs = json::array();
    for (const auto& s : c.segments) segs.push_back({s.file, s.begin, s.end});
    j["chunks"].push_back(segs);
  }
  j["partitions"] = partitions;
  j["input_bytes"] = input_bytes;
  j["fingerprint"] = fingerprint;
  return j;
}

Result<std::vector<InputFile>> list_inputs(const std::vector<std::string>& inputs,
                                           const std::string& format) {
  auto fmt = parse_corpus_format(format);
  if (!fmt) return fmt.status();
  auto paths = list_corpus_files(inputs);
  if (!paths) return paths.status();
  std::vector<InputFile> files;
  for (const auto& p : *paths) {
    struct stat st{};
    if (::stat(p.c_str(), &st) != 0) return Status::io("[curate] cannot stat " + p + ": " + errno_str());
    InputFile f;
    f.path = p;
    f.size = uint64_t(st.st_size);
    f.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    f.format = *fmt;
    if (f.format == CorpusFormat::kAuto) {
      int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return Status::io("[curate] cannot read " + p + ": " + errno_str());
      std::string head;
      Status s = pread_some(fd, &head, 1 << 16, 0, p);
      ::close(fd);
      CRUCIBLE_RETURN_IF_ERROR(s);
      f.format = detect_corpus_format(p, head);
    }
    if (f.size > (uint64_t(1) << 40))
      return Status::invalid("[curate] " + p + " is larger than 1 TiB; split it");
    files.push_back(f);
  }
  return files;
}

Result<CurationPlan> plan_curation(const CurateSpec& spec) {
  auto files = list_inputs(spec.inputs, spec.format);
  if (!files) return files.status();
  CurationPlan plan;
  plan.files = std::move(*files);
  for (const auto& f : plan.files) plan.input_bytes += f.size;
  if (plan.files.empty()) return Status::invalid("[curate] no input files found");

  const uint64_t chunk_bytes = std::max<uint64_t>(1, uint64_t(spec.settings.chunk_mb * 1048576.0));
  Chunk cur;
  auto close_chunk = [&] {
    if (!cur.segments.empty()) plan.chunks.push_back(std::move(cur));
    cur = Chunk{};
  };
  for (uint32_t i = 0; i < plan.files.size(); ++i) {
    const InputFile& f = plan.files[i];
    if (f.size == 0) continue;
    int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::io("[curate] cannot read " + f.path + ": " + errno_str());
    uint64_t pos = 0;
    Status status;
    while (pos < f.size) {
      uint64_t room = chunk_bytes - std::min(chunk_bytes, cur.bytes);
      auto end = next_boundary(fd, f, pos + std::max<uint64_t>(room, 1));
      if (!end) {
        status = end.status();
        break;
      }
      cur.segments.push_back({i, pos, *end});
      cur.bytes += *end - pos;
      pos = *end;
      if (cur.bytes >= chunk_bytes) close_chunk();
    }
    ::close(fd);
    CRUCIBLE_RETURN_IF_ERROR(status);
  }
  close_chunk();
  if (plan.chunks.empty()) return Status::invalid("[curate] the inputs are empty");
  if (plan.chunks.size() >= (uint64_t(1) << 31))
    return Status::invalid("[curate] too many chunks; raise curate.chunk_mb");

  plan.sampled_doc_bytes = sample_doc_bytes(plan.files, std::min<uint64_t>(chunk_bytes, 8 << 20));
  // Partitions: the largest partition's key records (16 bytes each, 1 + bands
  // per document) should take at most a quarter of the memory budget.
  if (spec.settings.partitions > 0) {
    plan.partitions = spec.settings.partitions;
  } else {
    double docs = double(plan.input_bytes) / std::max(1.0, plan.sampled_doc_bytes);
    double key_bytes = docs * 16.0 * (1 + spec.near.bands);
    double budget = spec.settings.memory_mb * 1048576.0 / 4;
    plan.partitions = int(std::min<uint64_t>(4096, std::max<uint64_t>(16, pow2_at_least(uint64_t(key_bytes / budget) + 1))));
  }
  json fp = plan.to_json();
  fp.erase("fingerprint");
  fp["spec"] = spec.to_json();
  fp["version"] = 1;
  std::string text = fp.dump();
  plan.fingerprint = hex64(XXH3_64bits(text.data(), text.size()));
  return plan;
}

CurateEstimate estimate_curation(const CurateSpec& spec, const CurationPlan& plan, int threads) {
  CurateEstimate e;
  const double doc_bytes = std::max(1.0, plan.sampled_doc_bytes);
  e.documents = uint64_t(double(plan.input_bytes) / doc_bytes);
  uint64_t max_chunk = 0;
  for (const auto& c : plan.chunks) max_chunk = std::max(max_chunk, c.bytes);
  const uint64_t h = uint64_t(spec.near.bands * spec.near.rows);
  const double per_doc_keys = 16.0 * (1 + spec.near.bands);
  const double per_doc_sigs = 4.0 * double(h);
  // A document record adds its lengths and its source ("path@offset") to the input's bytes.
  double path_bytes = 0;
  for (const auto& f : plan.files) path_bytes += double(f.path.size()) / double(plan.files.size());
  const double per_doc_overhead = 16 + path_bytes + 12;
  // Per chunk: section tables (keys: 2 per partition) and the stats with their examples.
  const double per_chunk = 24.0 * (2 * plan.partitions + 8) + 8192;
  // scan: the chunk's input, its cleaned documents, keys and signatures, per thread.
  double chunk_docs = double(max_chunk) / doc_bytes;
  double scan = double(max_chunk) * 3 + chunk_docs * (per_doc_keys + per_doc_sigs + per_doc_overhead);
  // dedup: one partition's records (twice: read + sorted) and the fingerprints of its candidates.
  double part_records = double(e.documents) * per_doc_keys / plan.partitions;
  double dedup = part_records * 2 + part_records / 16 * per_doc_sigs;
  // resolve: edges (24 bytes) and union-find entries (~48 bytes) of the duplicates, at most all documents.
  double resolve = double(e.documents) * 0.5 * (24 + 48);
  // output: the chunk's documents and the shard being built.
  double output = double(max_chunk) * 3;
  double per_thread = std::max({scan, dedup, output});
  double base = 64 << 20;  // binary, ICU data, buffers
  e.peak_memory = uint64_t(base + std::max(per_thread * std::max(1, threads), resolve));
  e.work_disk = uint64_t(double(plan.input_bytes) * 1.05 +
                         double(e.documents) * (per_doc_keys + per_doc_sigs + per_doc_overhead) +
                         double(plan.chunks.size()) * per_chunk + double(e.documents) * 24 * 0.5);
  e.output_disk = uint64_t(double(plan.input_bytes) * 1.1);
  e.detail = {{"documents", e.documents},
              {"mean_document_bytes", doc_bytes},
              {"largest_chunk_bytes", max_chunk},
              {"threads", threads},
              {"memory_bytes",
               {{"scan_per_thread", uint64_t(scan)},
                {"dedup_per_thread", uint64_t(dedup)},
                {"resolve", uint64_t(resolve)},
                {"output_per_thread", uint64_t(output)},
                {"peak", e.peak_memory}}},
              {"disk_bytes", {{"work", e.work_disk}, {"output", e.output_disk}}}};
  return e;
}

CurateLayout::CurateLayout(const std::string& out_dir) : out(out_dir), work(out_dir + "/.work") {}

namespace {
std::string numbered(const std::string& dir, const char* stem, size_t n, const char* ext) {
  char b[64];
  std::snprintf(b, sizeof b, "/%s-%05zu%s", stem, n, ext);
  return dir + b;
}
}  // namespace

std::string CurateLayout::plan() const { return work + "/plan.json"; }
std::string CurateLayout::docs(size_t c) const { return numbered(work, "chunk", c, ".docs"); }
std::string CurateLayout::sigs(size_t c) const { return numbered(work, "chunk", c, ".sigs"); }
std::string CurateLayout::keys(size_t c) const { return numbered(work, "chunk", c, ".keys"); }
std::string CurateLayout::stats(size_t c) const { return numbered(work, "chunk", c, ".stats"); }
std::string CurateLayout::chunk_out(size_t c) const { return numbered(work, "chunk", c, ".out"); }
std::string CurateLayout::edges(int p) const { return numbered(work, "part", size_t(p), ".edges"); }
std::string CurateLayout::shard_name(size_t c) const {
  return numbered("", "shard", c, ".jsonl").substr(1);
}
std::string CurateLayout::shard(size_t c) const { return out + "/" + shard_name(c); }

}  // namespace crucible::data
