// Tokenizer: a SentencePiece BPE model, trained by crucible from in-memory documents
// and stored as a standard SentencePiece `.model` file (loadable by the sentencepiece
// Python package too). Invariants of a model trained here:
//  - lossless: decode(encode(x)) == x for any valid UTF-8 x (newlines, tabs, runs of
//    spaces, emoji, U+FFFD, U+2581 included). Byte fallback encodes characters outside
//    the vocabulary as their UTF-8 bytes; normalisation is the identity; no dummy
//    prefix; whitespace is kept as is.
//  - ids: 0 = <unk> (never produced in practice, thanks to byte fallback), 1 = </s>
//    (eos, the end-of-document token the data pipeline appends between documents),
//    2..257 = the byte pieces <0x00>..<0xFF>, then the learned pieces. No bos, no pad.
//    encode() never emits eos; decode() renders it as "".
// Thread-safety: a loaded Tokenizer is immutable; its const methods may be called from
// several threads at once. train() sets process-wide SentencePiece state (log level,
// random seed): do not run two trainings concurrently.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace crucible::data {

class Tokenizer {
 public:
  static constexpr int32_t kUnkId = 0;
  static constexpr int32_t kEosId = 1;

  // Trains a BPE model with exactly `vocab_size` pieces on `docs` and writes it to
  // `model_path` atomically. Deterministic: the same docs, vocab_size and num_threads
  // give a byte-identical model file (num_threads is recorded in the model, so it
  // changes the fingerprint, not the pieces). A vocab_size the corpus cannot fill, or
  // one below the byte pieces plus the corpus' characters, is an error naming
  // `model.vocab_size` and the admissible bound.
  static Status train(const std::vector<std::string>& docs, int vocab_size,
                      const std::string& model_path, int num_threads = 2);
  // A missing, unreadable or corrupt file is an error naming the path.
  static Result<Tokenizer> load(const std::string& model_path);

  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(const int32_t* ids, size_t n) const;  // ids must be < vocab_size()
  std::string decode(const std::vector<int32_t>& ids) const {
    return decode(ids.data(), ids.size());
  }
  std::string piece(int32_t id) const;  // the piece's text as stored, e.g. "▁the", "<0x0A>"
  int vocab_size() const;
  int eos_id() const;
  // The piece's kind, for writing the model in other formats (data/hf_tokenizer.h):
  // a byte piece <0xNN>, or a special one (<unk>, </s>, control pieces) that text
  // never encodes to.
  bool is_byte(int32_t id) const;
  bool is_special(int32_t id) const;
  // XXH64 (seed 0) of the serialized model proto, i.e. of the .model file's bytes:
  // identifies the tokenizer in dataset and checkpoint manifests.
  uint64_t fingerprint() const { return fingerprint_; }

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

 private:
  Tokenizer();

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  uint64_t fingerprint_ = 0;
  // SentencePiece reads U+2581 in the input as its space marker and would decode it as
  // ' '; encode() therefore emits this character as its three byte pieces, which decode
  // verbatim. Empty when the model has no byte pieces (a model not trained here).
  std::vector<int32_t> lower_block_bytes_;
};

}  // namespace crucible::data
