// Curation pass 1 (scan): per chunk, read the documents, clean and filter them,
// and write the survivors with their exact-hash keys, band keys and signature
// fingerprints. See data/curate.h for the files.
#include <simdjson.h>

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>


#include <algorithm>
#include <filesystem>

#include "core/checked_file.h"
#include "core/file_io.h"
#include "data/curate.h"
#include "data/curate_internal.h"
#include "data/jsonl_line.h"

namespace crucible::data {
namespace {

using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr uint64_t kExactSeed = 0xE7AC7D0C5EEDull;

Status read_segment(const InputFile& f, const Segment& s, std::string* out) {
  int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::io("[curate] cannot read " + f.path + ": " + errno_str());
  // simdjson reads up to SIMDJSON_PADDING bytes past a line's end: the
  // buffer has that much room after the segment (see JsonlLine).
  out->reserve(s.end - s.begin + simdjson::SIMDJSON_PADDING);
  out->resize(s.end - s.begin);
  auto got = pread_full(fd, out->data(), out->size(), s.begin, f.path);
  ::close(fd);
  if (!got) return Status::io("[curate] " + got.status().message());
  if (*got < out->size())
    return Status::invalid("[curate] " + f.path + " changed while being curated (shorter than planned)");
  return Status::ok();
}

bool is_blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos;
}

// One chunk's scan state: the survivors and the counters.
class Scanner {
 public:
  Scanner(const CurateSpec& spec, const CurationPlan& plan, const MinHasher& hasher)
      : spec_(spec), plan_(plan), hasher_(hasher), h_(hasher.num_hashes()), sig_(h_), bands_(spec.near.bands) {
    keys_exact_.resize(plan.partitions);
    keys_near_.resize(plan.partitions);
  }

  // A raw document from the input; for JSONL, prefix and suffix are the other
  // members of its object (see curate_internal.h, DocView).
  // `repaired`: bad UTF-8 sequences the JSONL reader already replaced in this line.
  void add(std::string_view raw, const std::string& source, std::string_view prefix = {},
           std::string_view suffix = {}, size_t repaired_before = 0) {
    const int k = spec_.settings.examples;
    invalid_utf8_ += repaired_before;
    std::string text;
    if (simdjson::validate_utf8(raw.data(), raw.size())) {
      text = raw;  // the common case: valid already, no byte-by-byte repair
    } else {
      size_t repaired = 0;
      text = sanitize_utf8(raw, &repaired);
      invalid_utf8_ += repaired;
    }
    if (is_blank(text)) {
      ++empty_;
      return;
    }
    ++read_docs_, read_bytes_ += text.size();
    auto example = [&](const Verdict& v, std::string_view t) {
      return json{{"source", source}, {"text", snippet(t)}, {"value", v.value}, {"threshold", v.threshold}};
    };
    // clean
    const auto& s = spec_.settings;
    if (s.nfc || s.whitespace) {
      std::string cleaned = clean_text(text, CleanOptions{s.nfc, s.whitespace});
      if (cleaned != text) ++changed_by_clean_;
      if (cleaned.empty()) {
        clean_.remove("clean.empty", text.size(), k, json{{"source", source}, {"text", snippet(text)}});
        return;
      }
      clean_.pass(text.size(), cleaned.size());
      text = std::move(cleaned);
    }
    if (s.gopher_quality) {
      Verdict v = gopher_quality(text, spec_.quality);
      if (!v.keep) return quality_.remove(v.rule, text.size(), k, example(v, text));
      quality_.pass(text.size(), text.size());
    }
    if (s.gopher_repetition) {
      Verdict v = gopher_repetition(text, spec_.repetition);
      if (!v.keep) return repetition_.remove(v.rule, text.size(), k, example(v, text));
      repetition_.pass(text.size(), text.size());
    }
    if (s.c4) {
      size_t before = text.size(), lines = 0;
      std::string original = text;
      Verdict v = c4_filter(text, spec_.c4, &lines);
      c4_lines_removed_ += lines;
      if (!v.keep) return c4_.remove(v.rule, before, k, example(v, original));
      c4_.pass(before, text.size());
    }
    // survivor: id, keys, signature
    const uint64_t id = doc_id(chunk_, survivors_++);
    if (s.exact_dedup) {
      uint64_t key = XXH3_64bits_withSeed(text.data(), text.size(), kExactSeed);
      keys_exact_[key_partition(key, plan_.partitions)].push_back({key, id});
    }
    if (s.near_dedup) {
      hasher_.signature(text, sig_.data());
      hasher_.band_keys(sig_.data(), bands_.data());
      for (uint64_t key : bands_) keys_near_[key_partition(key, plan_.partitions)].push_back({key, id});
      for (uint64_t v : sig_) fingerprints_.push_back(sig_fingerprint(v));
    }
    append_doc(&docs_, {text, source, prefix, suffix});
    out_bytes_ += text.size();
  }

  Status write(size_t chunk, const CurateLayout& layout) {
    CRUCIBLE_RETURN_IF_ERROR(write_checked(layout.docs(chunk), docs_));
    {
      CheckedWriter w;
      CRUCIBLE_RETURN_IF_ERROR(w.open(layout.sigs(chunk)));
      const size_t per = kSigsPerSection * h_;
      for (size_t i = 0; i < fingerprints_.size(); i += per) {
        if (i) w.end_section();
        size_t n = std::min(per, fingerprints_.size() - i);
        CRUCIBLE_RETURN_IF_ERROR(w.append(fingerprints_.data() + i, n * 4));
      }
      CRUCIBLE_RETURN_IF_ERROR(w.commit());
    }
    {
      CheckedWriter w;
      CRUCIBLE_RETURN_IF_ERROR(w.open(layout.keys(chunk)));
      bool first = true;
      for (auto* table : {&keys_exact_, &keys_near_}) {
        for (auto& part : *table) {
          if (!first) w.end_section();
          first = false;
          std::sort(part.begin(), part.end());
          CRUCIBLE_RETURN_IF_ERROR(w.append(part.data(), part.size() * sizeof(KeyRecord)));
        }
      }
      CRUCIBLE_RETURN_IF_ERROR(w.commit());
    }
    json st;
    st["read"] = {{"docs", read_docs_}, {"bytes", read_bytes_}, {"invalid_utf8", invalid_utf8_},
                  {"empty", empty_}};
    st["clean"] = clean_.to_json();
    st["clean"]["changed"] = changed_by_clean_;
    st["gopher_quality"] = quality_.to_json();
    st["gopher_repetition"] = repetition_.to_json();
    st["c4"] = c4_.to_json();
    st["c4"]["lines_removed"] = c4_lines_removed_;
    st["survivors"] = {{"docs", survivors_}, {"bytes", out_bytes_}};
    return write_checked(layout.stats(chunk), st.dump());
  }

  void set_chunk(size_t c) { chunk_ = c; }

 private:
  const CurateSpec& spec_;
  const CurationPlan& plan_;
  const MinHasher& hasher_;
  size_t h_;
  std::vector<uint64_t> sig_, bands_;
  size_t chunk_ = 0;
  uint64_t survivors_ = 0, out_bytes_ = 0;
  uint64_t read_docs_ = 0, read_bytes_ = 0, invalid_utf8_ = 0, empty_ = 0, changed_by_clean_ = 0,
           c4_lines_removed_ = 0;
  StageStats clean_, quality_, repetition_, c4_;
  std::vector<std::vector<KeyRecord>> keys_exact_, keys_near_;
  std::vector<uint32_t> fingerprints_;
  std::string docs_;
};


Status scan_segment(const InputFile& f, const Segment& seg, Scanner* sc) {
  std::string content;
  CRUCIBLE_RETURN_IF_ERROR(read_segment(f, seg, &content));
  auto source = [&](size_t offset) { return f.path + "@" + std::to_string(seg.begin + offset); };
  switch (f.format) {
    case CorpusFormat::kFortunes:
      for_each_fortune(content, [&](size_t off, std::string_view entry) { sc->add(entry, source(off)); });
      return Status::ok();
    case CorpusFormat::kJsonl: {
      JsonlLine parser;
      size_t pos = 0;
      while (pos < content.size()) {
        size_t nl = content.find('\n', pos);
        size_t end = nl == std::string::npos ? content.size() : nl;
        std::string_view line(content.data() + pos, end - pos);
        if (!is_blank(line)) {
          // Room after the line for simdjson's padding: the rest of the buffer.
          const size_t room = content.capacity() - pos;
          if (!parser.parse(line, room))
            return Status::invalid("[curate] " + f.path + " at byte " + std::to_string(seg.begin + pos) +
                                   ": " + parser.error);
          sc->add(parser.text, source(pos), parser.prefix, parser.suffix, parser.repaired);
        }
        pos = end + 1;
      }
      return Status::ok();
    }
    default:
      sc->add(content, source(0));
      return Status::ok();
  }
}

}  // namespace

void append_doc(std::string* out, const DocView& d) {
  for (std::string_view part : {d.text, d.source, d.prefix, d.suffix}) {
    uint32_t n = uint32_t(part.size());
    out->append(reinterpret_cast<const char*>(&n), 4);
    out->append(part);
  }
}

Status next_doc(std::string_view buf, size_t* pos, DocView* d, const std::string& path) {
  std::string_view* parts[4] = {&d->text, &d->source, &d->prefix, &d->suffix};
  for (auto* part : parts) {
    uint32_t n = 0;
    if (buf.size() - *pos < 4) return Status::corrupt("[curate] " + path + ": truncated document record");
    std::memcpy(&n, buf.data() + *pos, 4);
    *pos += 4;
    if (buf.size() - *pos < n) return Status::corrupt("[curate] " + path + ": truncated document record");
    *part = buf.substr(*pos, n);
    *pos += n;
  }
  return Status::ok();
}

Status scan_chunk(const CurateSpec& spec, const CurationPlan& plan, const MinHasher& hasher,
                  size_t chunk, const CurateLayout& layout) {
  Scanner sc(spec, plan, hasher);
  sc.set_chunk(chunk);
  for (const auto& seg : plan.chunks[chunk].segments)
    CRUCIBLE_RETURN_IF_ERROR(scan_segment(plan.files[seg.file], seg, &sc));
  return sc.write(chunk, layout);
}

namespace {
// True when every file verifies; a file that exists but does not verify is
// removed (it will be recomputed) and named in *problem.
bool files_verify(const std::vector<std::string>& files, std::string* problem) {
  for (const auto& f : files) {
    std::error_code ec;
    if (!std::filesystem::exists(f, ec)) return false;
  }
  for (const auto& f : files) {
    auto r = CheckedReader::open(f);
    Status s = r ? r->verify_all() : r.status();
    if (!s.is_ok()) {
      if (problem) *problem = s.message();
      std::error_code ec;
      std::filesystem::remove(f, ec);
      return false;
    }
  }
  return true;
}
}  // namespace

bool scan_done(const CurationPlan&, size_t chunk, const CurateLayout& layout, std::string* problem) {
  return files_verify({layout.docs(chunk), layout.sigs(chunk), layout.keys(chunk), layout.stats(chunk)},
                      problem);
}

bool dedup_done(int partition, const CurateLayout& layout, std::string* problem) {
  return files_verify({layout.edges(partition)}, problem);
}


}  // namespace crucible::data
