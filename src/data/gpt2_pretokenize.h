// GPT-2's pre-tokenization: the cut of a text into the pieces its byte-level
// BPE encodes one by one, as the regex of OpenAI's encoder.py (and of HF
// `tokenizers`' ByteLevel pre-tokenizer) cuts it:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// written out by hand over UTF-8, with ICU's character properties (\s is
// Unicode White_Space, \p{L} and \p{N} the general categories), instead of a
// regex engine. The pieces partition the text: concatenated they are the text.
// An invalid UTF-8 byte counts as a character of its own outside \s, L and N.
// Pure function; thread-safe.
#pragma once
#include <string_view>
#include <vector>

namespace crucible::data {

std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

}  // namespace crucible::data
