// BpeTokenizer: GPT-2's byte-level BPE (OpenAI's encoder.py, HF's GPT2Tokenizer),
// the tokenizer of models imported from Hugging Face (`crucible import`).
// Text is cut by GPT-2's pre-tokenizer (data/gpt2_pretokenize.h); each piece's
// UTF-8 bytes become the printable characters of GPT-2's bytes-to-unicode
// table, one per byte, and adjacent symbols are merged by the rank of their
// pair in merges.txt (lowest first) until no ranked pair is left; each final
// symbol's id is its entry in vocab.json. Every byte is a symbol of the
// vocabulary (checked at load), so every text encodes and decode(encode(x)) == x.
// Special tokens (<|endoftext|>) are never produced from text: "<|endoftext|>"
// in a text is characters, as crucible's SentencePiece path treats "</s>";
// decode renders them as "".
//
// Stored in a run as vocab.json + merges.txt (the GPT-2 files, written back
// canonically by save()); fingerprint() is XXH64 of those two files' bytes.
// Thread-safety: encode/decode may be called from several threads at once (the
// cache of encoded pieces is behind a mutex).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"

namespace crucible::data {

class BpeTokenizer {
 public:
  // vocab: token text (bytes-to-unicode characters) -> id; merges: pairs of
  // token texts, by rank. `origin` names the source in errors: "[data]
  // ORIGIN: ..." for a merge naming an unknown token, a byte missing from the
  // vocabulary, ids not 0..V-1 without gaps, or no <|endoftext|>.
  static Result<BpeTokenizer> from_parts(std::vector<std::pair<std::string, int32_t>> vocab,
                                         std::vector<std::pair<std::string, std::string>> merges,
                                         const std::string& origin);
  // GPT-2's files: vocab.json and merges.txt ("#version" line optional).
  static Result<BpeTokenizer> load(const std::string& vocab_json, const std::string& merges_txt);
  // tokenizer.json of HF `tokenizers`: a BPE model with GPT-2's ByteLevel
  // pre-tokenizer (no normalizer, no prefix space); anything else is refused.
  static Result<BpeTokenizer> load_tokenizer_json(const std::string& path);
  // Writes dir/vocab.json and dir/merges.txt.
  Status save(const std::string& dir) const;

  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(const int32_t* ids, size_t n) const;  // ids must be < vocab_size()
  std::string decode(const std::vector<int32_t>& ids) const {
    return decode(ids.data(), ids.size());
  }
  int vocab_size() const { return int(tokens_.size()); }
  int eos_id() const { return eos_id_; }
  uint64_t fingerprint() const { return fingerprint_; }
  const std::string& token(int32_t id) const { return tokens_[size_t(id)]; }

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

 private:
  BpeTokenizer();
  // The ids of one pre-tokenized piece (its bytes merged by rank).
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;  // id -> token text
  std::vector<std::pair<std::string, std::string>> merges_;
  std::unordered_map<std::string, int32_t> ids_;
  // (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> ranks_;
  int32_t byte_id_[256] = {};
  std::vector<bool> special_;  // ids decode renders as ""
  int32_t eos_id_ = -1;
  uint64_t fingerprint_ = 0;
  std::unique_ptr<std::mutex> cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

// GPT-2's bytes-to-unicode table: byte b -> the UTF-8 of its printable stand-in.
const std::string& gpt2_byte_char(uint8_t b);

}  // namespace crucible::data
