// TextStream: a request's generated ids as the text a client may be sent so
// far. Decodes every id so far (a token can be a partial UTF-8 character, or
// change how the previous ones read) and releases only text that (1) later
// tokens can no longer change, (2) ends on a whole UTF-8 character and (3)
// cannot be the start of a stop sequence. When a stop sequence appears, the
// text before it is the completion's end and stopped() turns true: the
// caller cancels the request. The end-of-text id ends the text (the engine
// ends the request on it). Not thread-safe: one per request handler.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/text_tokenizer.h"

namespace crucible::serve {

class TextStream {
 public:
  // eos_ends: the end-of-text id ends the text; else it is a token that
  // reads as nothing (a request with ignore_eos).
  TextStream(const data::TextTokenizer& tok, std::vector<std::string> stop, bool eos_ends = true);

  // Takes the next ids; returns the text that can be sent now.
  std::string add(const std::vector<int32_t>& ids);
  // At the end of the request: what was held back (nothing after a stop).
  std::string finish();

  bool stopped() const { return stopped_; }
  // Ids that went into the text: all of them, or up to the one that
  // completed a stop sequence.
  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  const data::TextTokenizer& tok_;
  std::vector<std::string> stop_;
  std::vector<int32_t> ids_, text_ids_;  // all; those that decode (no end-of-text)
  std::string sent_;
  bool eos_ends_;
  bool stopped_ = false, ended_ = false;
};

}  // namespace crucible::serve
