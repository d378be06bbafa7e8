// A prepared dataset: one directory holding the tokenizer and the token
// shards training reads, plus dataset.json describing where they came from.
//
//   DIR/tokenizer.model   SentencePiece BPE model (trained here), or
//   DIR/vocab.json, DIR/merges.txt   a given GPT-2 byte-level BPE (DatasetSpec::tokenizer)
//   DIR/train.tok         token shard (docs/formats.md), documents joined by EOS
//   DIR/val.tok           held-out token shard
//   DIR/dataset.json      sources, counts, split, tokenizer fingerprint
//
// The split is made on the token stream, not on documents, so it works the same
// for a corpus of one book and of a million fortunes: the stream is cut into
// blocks of kSplitBlockTokens and every k-th block (k = round(1/val_fraction))
// is held out — evenly spread over the corpus, deterministic, no RNG.
// A dataset directory is built as DIR.tmp and renamed when complete, so a
// directory without `.tmp` is always whole.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace crucible::data {

inline constexpr int64_t kSplitBlockTokens = 2048;

struct DatasetSpec {
  std::vector<std::string> sources;  // corpus files or directories
  std::string format = "auto";       // auto | fortunes | text | jsonl
  int vocab_size = 8192;
  double val_fraction = 0.05;
  // A directory holding the tokenizer to use instead of training one
  // (data/text_tokenizer.h: tokenizer.model, or vocab.json + merges.txt),
  // e.g. an imported run's; its files are copied into the dataset.
  std::string tokenizer;
};

struct Dataset {
  std::string dir;
  nlohmann::json info;  // dataset.json
  // The tokenizer's files in the dataset (tokenizer.model, or vocab.json and merges.txt).
  std::vector<std::string> tokenizer_files() const;
  std::string train_path() const { return dir + "/train.tok"; }
  std::string val_path() const { return dir + "/val.tok"; }
};

using LogFn = std::function<void(const std::string&)>;

// Builds the dataset into out_dir (which must not exist yet): reads the corpus,
// trains the tokenizer, tokenizes, splits, writes the shards.
Result<Dataset> build_dataset(const DatasetSpec& spec, const std::string& out_dir,
                              const LogFn& log);
// The cache: cache_dir/<name>-<key> where key hashes the spec and each source
// file's path, size and modification time; built on first use, reused after.
Result<Dataset> cached_dataset(const DatasetSpec& spec, const std::string& cache_dir,
                               const LogFn& log);
// Opens a prepared dataset directory, checking that its files exist.
Result<Dataset> open_dataset(const std::string& dir);

}  // namespace crucible::data
