// TextTokenizer: what generation and export need of a run's tokenizer,
// whichever kind it is: crucible's SentencePiece BPE (RUN/tokenizer.model,
// data/tokenizer.h, trained by crucible) or GPT-2's byte-level BPE
// (RUN/vocab.json + RUN/merges.txt, data/bpe_tokenizer.h, from `crucible
// import`). Both are lossless on valid UTF-8 and render their
// end-of-document token as "". Implementations are immutable after loading
// and thread-safe.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace crucible::data {

class TextTokenizer {
 public:
  enum class Kind { kSentencePiece, kByteLevelBpe };
  virtual ~TextTokenizer() = default;
  virtual Kind kind() const = 0;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const int32_t* ids, size_t n) const = 0;  // ids < vocab_size()
  std::string decode(const std::vector<int32_t>& ids) const {
    return decode(ids.data(), ids.size());
  }
  virtual int vocab_size() const = 0;
  virtual int eos_id() const = 0;
  // Identifies the tokenizer in manifests (data/tokenizer.h, data/bpe_tokenizer.h).
  virtual uint64_t fingerprint() const = 0;
  // The file(s) it was loaded from, for messages.
  virtual const std::string& path() const = 0;
};

// The run's tokenizer: RUN/tokenizer.model when present, else RUN/vocab.json
// with RUN/merges.txt; not_found naming both when neither is there.
Result<std::unique_ptr<TextTokenizer>> load_run_tokenizer(const std::string& run_dir);

}  // namespace crucible::data
