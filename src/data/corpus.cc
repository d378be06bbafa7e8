#include "data/corpus.h"

#include "core/json_io.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace crucible::data {
namespace {

namespace fs = std::filesystem;

bool is_blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos;
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

Status read_whole_file(const fs::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io("[data] cannot read " + path.string() + ": " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  in.seekg(0);
  if (size < 0) return Status::io("[data] cannot read " + path.string() + ": not seekable");
  out->resize(size_t(size));
  if (!in.read(out->data(), size))
    return Status::io("[data] cannot read " + path.string() + ": " + std::strerror(errno));
  return Status::ok();
}

// The files a directory contributes, sorted so the corpus order is deterministic.
Status walk_directory(const fs::path& dir, std::vector<fs::path>* files) {
  std::error_code ec;
  std::vector<fs::path> found;
  fs::recursive_directory_iterator it(dir, ec), end;
  if (ec) return Status::io("[data] cannot list " + dir.string() + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const fs::path& p = it->path();
    std::string name = p.filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory(ec) && !it->is_symlink(ec)) it.disable_recursion_pending();
      continue;
    }
    // Symlinks: fortunes' *.u8 point at the text files; directory links could loop.
    if (it->is_symlink(ec) || !it->is_regular_file(ec)) continue;
    if (lowercase(p.extension().string()) == ".dat") continue;  // fortune's binary index
    found.push_back(p);
  }
  if (ec) return Status::io("[data] cannot list " + dir.string() + ": " + ec.message());
  std::sort(found.begin(), found.end());
  files->insert(files->end(), found.begin(), found.end());
  return Status::ok();
}

// Calls fn(line, line_number) for each line without its '\n' (and without a '\r' before
// it, so files with Windows line endings parse the same); fn returns false to stop.
template <typename Fn>
void for_each_line(std::string_view content, Fn&& fn) {
  size_t pos = 0, number = 0;
  while (pos < content.size()) {
    size_t nl = content.find('\n', pos);
    size_t end = nl == std::string_view::npos ? content.size() : nl;
    std::string_view line = content.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!fn(line, ++number, pos, end)) return;
    pos = end + 1;
  }
}

bool has_separator_line(std::string_view content) {
  bool found = false;
  for_each_line(content, [&](std::string_view line, size_t, size_t, size_t) {
    found = line == "%";
    return !found;
  });
  return found;
}

class DocumentSink {
 public:
  DocumentSink(std::vector<std::string>* docs, CorpusStats* stats) : docs_(docs), stats_(stats) {}
  void add(std::string_view doc) {
    if (is_blank(doc)) {
      ++stats_->skipped_empty;
      return;
    }
    size_t repaired = 0;
    docs_->push_back(sanitize_utf8(doc, &repaired));
    stats_->invalid_utf8 += repaired;
    stats_->bytes += docs_->back().size();
  }

 private:
  std::vector<std::string>* docs_;
  CorpusStats* stats_;
};

void parse_fortunes(std::string_view content, DocumentSink* sink) {
  for_each_fortune(content, [&](size_t, std::string_view entry) { sink->add(entry); });
}

Status parse_jsonl(const fs::path& path, std::string_view content, DocumentSink* sink,
                   CorpusStats* stats) {
  Status status;
  for_each_line(content, [&](std::string_view line, size_t number, size_t, size_t) {
    if (is_blank(line)) return true;
    // Repair bad bytes first: the JSON parser would reject them, and a corpus with a few
    // bad bytes should load like the other formats do, not fail.
    size_t repaired = 0;
    std::string clean = sanitize_utf8(line, &repaired);
    stats->invalid_utf8 += repaired;
    auto where = "[data] " + path.string() + ":" + std::to_string(number) + ": ";
    nlohmann::json obj = nlohmann::json::parse(clean, nullptr, /*allow_exceptions=*/false);
    if (obj.is_discarded()) {
      status = Status::invalid(where + "not valid JSON");
      return false;
    }
    auto text = obj.is_object() ? obj.find("text") : obj.end();
    if (!obj.is_object() || text == obj.end() || !text->is_string()) {
      status = Status::invalid(where + "expected a JSON object with a string field \"text\"");
      return false;
    }
    sink->add(text->get_ref<const std::string&>());
    return true;
  });
  return status;
}

// A directory `crucible curate` wrote: its report lists the shards to read.
bool curated_shards(const fs::path& dir, std::vector<fs::path>* files) {
  std::ifstream in(dir / "report.json", std::ios::binary);
  if (!in) return false;
  nlohmann::json report = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json_string_or(report, "schema", "") != "crucible-curate/1") return false;
  if (!report.contains("shards") || !report["shards"].is_array()) return false;
  for (const auto& shard : report["shards"]) {
    const std::string file = json_string_or(shard, "file", "");
    // A shard is a plain name inside dir, never a path out of it.
    if (file.empty() || file.find('/') != std::string::npos || file[0] == '.') return false;
    files->push_back(dir / file);
  }
  return true;
}

std::string join_paths(const std::vector<std::string>& paths) {
  std::string out;
  for (const auto& p : paths) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace

Result<CorpusFormat> parse_corpus_format(std::string_view name) {
  if (name == "auto") return CorpusFormat::kAuto;
  if (name == "fortunes") return CorpusFormat::kFortunes;
  if (name == "text") return CorpusFormat::kText;
  if (name == "jsonl") return CorpusFormat::kJsonl;
  return Status::invalid("[data] unknown corpus format \"" + std::string(name) +
                         "\" (expected auto, fortunes, text or jsonl)");
}

namespace detail {

void for_each_fortune(std::string_view content,
                      void (*fn)(void* ctx, size_t offset, std::string_view entry), void* ctx) {
  size_t entry_begin = 0;
  auto add_entry = [&](size_t entry_end) {
    std::string_view entry = content.substr(entry_begin, entry_end - entry_begin);
    // The line break before the `%` line, and any blank lines above it (a few fortunes
    // have them; they are layout, not text).
    while (entry.ends_with('\n') || entry.ends_with('\r')) entry.remove_suffix(1);
    fn(ctx, entry_begin, entry);
  };
  for_each_line(content, [&](std::string_view line, size_t, size_t begin, size_t end) {
    if (line == "%") {
      add_entry(begin);
      entry_begin = std::min(end + 1, content.size());
    }
    return true;
  });
  // The text after the last `%` is an entry too, unless there is none (files end in %).
  if (entry_begin < content.size()) add_entry(content.size());
}

}  // namespace detail

CorpusFormat detect_corpus_format(const std::string& path, std::string_view content) {
  std::string ext = lowercase(fs::path(path).extension().string());
  if (ext == ".jsonl" || ext == ".json") return CorpusFormat::kJsonl;
  if (has_separator_line(content)) return CorpusFormat::kFortunes;
  return CorpusFormat::kText;
}

Result<std::vector<std::string>> list_corpus_files(const std::vector<std::string>& paths) {
  std::vector<fs::path> files;
  for (const auto& p : paths) {
    std::error_code ec;
    fs::file_status st = fs::status(p, ec);  // follows symlinks the user named explicitly
    if (!fs::exists(st)) return Status::not_found("[data] corpus path " + p + " does not exist");
    if (fs::is_directory(st)) {
      if (!curated_shards(p, &files)) CRUCIBLE_RETURN_IF_ERROR(walk_directory(p, &files));
    } else {
      files.emplace_back(p);
    }
  }
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back(f.string());
  return out;
}

Result<std::vector<std::string>> read_corpus(const std::vector<std::string>& paths,
                                             CorpusFormat format, CorpusStats* stats) {
  auto files = list_corpus_files(paths);
  if (!files) return files.status();

  CorpusStats local;
  CorpusStats* s = stats ? stats : &local;
  *s = CorpusStats{};
  std::vector<std::string> docs;
  DocumentSink sink(&docs, s);
  std::string content;
  for (const auto& file : *files) {
    CRUCIBLE_RETURN_IF_ERROR(read_whole_file(file, &content));
    ++s->files;
    CorpusFormat f = format == CorpusFormat::kAuto ? detect_corpus_format(file, content) : format;
    switch (f) {
      case CorpusFormat::kFortunes:
        parse_fortunes(content, &sink);
        break;
      case CorpusFormat::kJsonl:
        CRUCIBLE_RETURN_IF_ERROR(parse_jsonl(file, content, &sink, s));
        break;
      case CorpusFormat::kText:
      case CorpusFormat::kAuto:
        sink.add(content);
        break;
    }
  }
  s->documents = docs.size();
  if (docs.empty()) {
    return Status::invalid("[data] corpus " + join_paths(paths) + ": no documents found (" +
                           std::to_string(s->files) + " files read, " +
                           std::to_string(s->skipped_empty) + " empty documents skipped)");
  }
  return docs;
}

void append_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

std::string sanitize_utf8(std::string_view s, size_t* repaired) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(s.size());
  size_t count = 0;
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const uint8_t b = uint8_t(s[i]);
    if (b < 0x80) {
      out.push_back(char(b));
      ++i;
      continue;
    }
    // Continuation bytes needed and the allowed range of the first one: the narrowed
    // ranges exclude overlong forms (E0, F0), surrogates (ED) and > U+10FFFF (F4).
    int need = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      need = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      need = 2;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      need = 3;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    }
    // Length of the valid prefix starting at i; a full sequence is 1 + need bytes.
    size_t len = 1;
    if (need > 0) {
      while (len <= size_t(need) && i + len < n) {
        const uint8_t c = uint8_t(s[i + len]);
        const bool ok = len == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
        if (!ok) break;
        ++len;
      }
    }
    if (need > 0 && len == size_t(need) + 1) {
      out.append(s.substr(i, len));
    } else {
      out.append(kReplacement);  // one U+FFFD per maximal invalid subpart
      ++count;
    }
    i += len;
  }
  if (repaired) *repaired = count;
  return out;
}

}  // namespace crucible::data
