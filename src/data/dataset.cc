#include "data/dataset.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/clock.h"
#include "core/dir_lock.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "data/corpus.h"
#include "data/shard.h"
#include "data/text_tokenizer.h"
#include "data/tokenizer.h"

namespace crucible::data {

namespace fs = std::filesystem;

namespace {

// Tokenizes every document (in parallel: SentencePiece encoding is const and
// thread-safe) and joins them in corpus order, each followed by EOS.
std::vector<int32_t> tokenize_documents(const TextTokenizer& tok,
                                        const std::vector<std::string>& docs) {
  std::vector<std::vector<int32_t>> parts(docs.size());
#pragma omp parallel for schedule(dynamic, 64)
  for (size_t i = 0; i < docs.size(); ++i) parts[i] = tok.encode(docs[i]);
  size_t total = 0;
  for (const auto& p : parts) total += p.size() + 1;
  std::vector<int32_t> stream;
  stream.reserve(total);
  for (const auto& p : parts) {
    stream.insert(stream.end(), p.begin(), p.end());
    stream.push_back(tok.eos_id());
  }
  return stream;
}

}  // namespace

Result<Dataset> build_dataset(const DatasetSpec& spec, const std::string& out_dir,
                              const LogFn& log) {
  Stopwatch sw;
  auto format = parse_corpus_format(spec.format);
  if (!format) return format.status();
  CorpusStats stats;
  auto docs = read_corpus(spec.sources, *format, &stats);
  if (!docs) return docs.status();
  log("[data] corpus: " + std::to_string(stats.documents) + " documents, " +
      std::to_string(stats.bytes) + " bytes from " + std::to_string(stats.files) + " files" +
      (stats.invalid_utf8 ? " (" + std::to_string(stats.invalid_utf8) +
                                " invalid UTF-8 sequences replaced by U+FFFD)"
                          : ""));

  // A private build directory: several processes (ranks, parallel tests) may
  // build the same cached dataset at once; the first rename wins.
  const std::string tmp = out_dir + ".tmp." + std::to_string(getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (!fs::create_directories(tmp, ec) && ec)
    return Status::io("[data] cannot create " + tmp + ": " + ec.message());
  auto fail = [&](Status s) {
    fs::remove_all(tmp, ec);
    return s;
  };

  Stopwatch tok_sw;
  Status st;
  if (spec.tokenizer.empty()) {
    log("[data] training a " + std::to_string(spec.vocab_size) +
        "-token SentencePiece BPE tokenizer ...");
    st = Tokenizer::train(*docs, spec.vocab_size, tmp + "/tokenizer.model");
  } else {  // the given one, copied
    const Dataset given{spec.tokenizer, {}};
    for (const std::string& f : given.tokenizer_files()) {
      auto bytes = read_file(f);
      st = bytes ? write_file_atomic(tmp + "/" + fs::path(f).filename().string(), *bytes)
                 : bytes.status();
      if (!st.is_ok()) break;
    }
    log("[data] tokenizing with the tokenizer of " + spec.tokenizer);
  }
  if (!st.is_ok()) return fail(st);
  auto tok = load_run_tokenizer(tmp);
  if (!tok) return fail(tok.status());
  double tok_train_s = tok_sw.elapsed_s();

  std::vector<int32_t> stream = tokenize_documents(**tok, *docs);
  // Every k-th block of the stream is held out (see the header).
  const int64_t k = std::max<int64_t>(2, std::llround(1.0 / spec.val_fraction));
  std::vector<int32_t> train, val;
  train.reserve(stream.size());
  for (size_t b = 0; b * kSplitBlockTokens < stream.size(); ++b) {
    size_t begin = b * kSplitBlockTokens, end = std::min(stream.size(), begin + kSplitBlockTokens);
    auto& dst = (int64_t(b) % k == k - 1) ? val : train;
    dst.insert(dst.end(), stream.begin() + begin, stream.begin() + end);
  }
  if (val.empty()) {
    return fail(Status::invalid("[data] corpus " + spec.sources.front() + ": only " +
                                std::to_string(stream.size()) + " tokens, too few to hold out " +
                                "a validation block of " + std::to_string(kSplitBlockTokens) +
                                " (need at least " + std::to_string(k * kSplitBlockTokens) + ")"));
  }
  const uint64_t fp = (*tok)->fingerprint();
  st = write_token_shard(tmp + "/train.tok", train.data(), train.size(), (*tok)->vocab_size(), fp);
  if (!st.is_ok()) return fail(st);
  st = write_token_shard(tmp + "/val.tok", val.data(), val.size(), (*tok)->vocab_size(), fp);
  if (!st.is_ok()) return fail(st);

  nlohmann::json info = {
      {"version", 1},
      {"sources", spec.sources},
      {"format", spec.format},
      {"files", stats.files},
      {"documents", stats.documents},
      {"corpus_bytes", stats.bytes},
      {"invalid_utf8_replaced", stats.invalid_utf8},
      {"vocab_size", (*tok)->vocab_size()},
      {"eos_id", (*tok)->eos_id()},
      {"tokenizer_fingerprint", hex64(fp)},
      {"tokens", stream.size()},
      {"train_tokens", train.size()},
      {"val_tokens", val.size()},
      {"bytes_per_token", double(stats.bytes) / double(std::max<size_t>(1, stream.size()))},
      {"split", {{"block_tokens", kSplitBlockTokens}, {"val_every", k}}},
      {"tokenizer_train_s", tok_train_s},
  };
  st = write_file_atomic(tmp + "/dataset.json", info.dump(2) + "\n");
  if (!st.is_ok()) return fail(st);
  fs::rename(tmp, out_dir, ec);
  if (ec) {
    if (auto other = open_dataset(out_dir); other) {  // another process finished first
      fs::remove_all(tmp, ec);
      log("[data] using dataset " + out_dir + " built concurrently by another process");
      return other;
    }
    return fail(Status::io("[data] cannot rename " + tmp + " to " + out_dir + ": " + ec.message()));
  }
  log("[data] dataset " + out_dir + ": " + std::to_string(train.size()) + " train / " +
      std::to_string(val.size()) + " validation tokens, " +
      std::to_string(info["bytes_per_token"].get<double>()).substr(0, 4) +
      " bytes per token (tokenizer " + std::to_string(tok_train_s).substr(0, 4) + " s, total " +
      std::to_string(sw.elapsed_s()).substr(0, 4) + " s)");
  return Dataset{out_dir, std::move(info)};
}

std::vector<std::string> Dataset::tokenizer_files() const {
  // SentencePiece unless GPT-2's files are there (a missing dataset is then
  // reported by its tokenizer.model, as it always was).
  if (!fs::exists(dir + "/tokenizer.model") && fs::exists(dir + "/vocab.json"))
    return {dir + "/vocab.json", dir + "/merges.txt"};
  return {dir + "/tokenizer.model"};
}

Result<Dataset> open_dataset(const std::string& dir) {
  Dataset ds{dir, {}};
  std::vector<std::string> files = ds.tokenizer_files();
  files.push_back(ds.train_path());
  files.push_back(ds.val_path());
  for (const std::string& f : files)
    if (!fs::is_regular_file(f))
      return Status::not_found("[data] dataset " + dir + ": missing " + f +
                               " (prepare one with `crucible tokenize`)");
  std::ifstream in(dir + "/dataset.json");
  if (!in) return Status::not_found("[data] dataset " + dir + ": missing dataset.json");
  ds.info = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (ds.info.is_discarded() || !ds.info.is_object())
    return Status::corrupt("[data] dataset " + dir + ": dataset.json is not valid JSON");
  return ds;
}

Result<Dataset> cached_dataset(const DatasetSpec& spec, const std::string& cache_dir,
                               const LogFn& log) {
  // The key covers what decides the dataset's content: the spec, and each
  // source file's identity (path, size, mtime) — as make decides staleness.
  std::ostringstream key;
  key << spec.format << '\n' << spec.vocab_size << '\n' << spec.val_fraction << '\n';
  if (!spec.tokenizer.empty()) {  // a given tokenizer: its identity, not its path
    auto tok = load_run_tokenizer(spec.tokenizer);
    if (!tok) return tok.status();
    key << "tokenizer " << (*tok)->fingerprint() << '\n';
  }
  std::error_code ec;
  for (const auto& src : spec.sources) {
    if (!fs::exists(src, ec))
      return Status::not_found("[data] corpus path " + src + " does not exist");
    std::vector<fs::path> files;
    if (fs::is_directory(src, ec)) {
      for (auto it = fs::recursive_directory_iterator(src, ec); !ec && it != fs::end(it);
           it.increment(ec))
        // Hidden files are not corpus (the readers skip them; a curation
        // output's .lock changes with every run that opens it).
        if (it->is_regular_file(ec) && it->path().filename().string().rfind('.', 0) != 0)
          files.push_back(it->path());
    } else {
      files.push_back(src);
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      auto mtime = fs::last_write_time(f, ec).time_since_epoch().count();
      key << f.string() << ' ' << fs::file_size(f, ec) << ' ' << mtime << '\n';
    }
  }
  const std::string k = key.str();
  std::string stem = fs::path(spec.sources.front()).filename().string();
  if (stem.empty()) stem = fs::path(spec.sources.front()).parent_path().filename().string();
  const std::string dir = cache_dir + "/" + stem + "-" + std::to_string(spec.vocab_size) + "-" +
                          hex64(XXH64(k.data(), k.size(), 0)).substr(0, 12);
  // One builder per entry: another process building it is waited for (it
  // may train a tokenizer for minutes), and never read half-built.
  const std::string name = fs::path(dir).filename().string();
  DirLock lock;
  CRUCIBLE_RETURN_IF_ERROR(lock.acquire(cache_dir, "." + name + ".lock", "crucible (dataset build)",
                                        24 * 3600, "remove it from " + cache_dir + " if that process is gone",
                                        [&](const std::string& holder) {
                                          log("[data] waiting for " + holder + ", which is building " + dir);
                                        }));
  // Under the lock no build of this entry is running: a private build
  // directory left by one that was killed (DIR.tmp.PID) is debris.
  for (auto it = fs::directory_iterator(cache_dir, ec); !ec && it != fs::end(it); it.increment(ec)) {
    const std::string base = it->path().filename().string();
    if (base.rfind(name + ".tmp.", 0) == 0) {
      std::error_code rm;
      fs::remove_all(it->path(), rm);
      log("[data] removed " + it->path().string() + ", left by an interrupted build");
    }
  }
  if (fs::is_directory(dir)) {
    auto ds = open_dataset(dir);
    if (ds) {
      log("[data] using cached dataset " + dir);
      return ds;
    }
    log(ds.status().message() + "; rebuilding it");
    fs::remove_all(dir, ec);
  }
  return build_dataset(spec, dir, log);
}

}  // namespace crucible::data
