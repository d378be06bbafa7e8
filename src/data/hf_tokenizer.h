// crucible's SentencePiece model (data/tokenizer.h) in Hugging Face's form: the
// files `transformers.AutoTokenizer.from_pretrained(DIR)` loads and that encode
// every text to the ids crucible's Tokenizer::encode gives.
//
// tokenizer.json is a `tokenizers` BPE model with byte_fallback, and no
// normalizer or pre-tokenizer: SentencePiece's BPE encodes the whole
// (identity-normalised, no dummy prefix) text by merging the adjacent pair
// whose union is the highest-scored piece, which is HF's merge-by-rank when
// the merges are every split of every piece, ranked by the piece's id. The
// pieces are written with their space mark U+2581 turned back into the space
// it stands for (merges as pairs, so a space inside a token is not a
// separator): a literal U+2581 in the text is then in no token and falls back
// to its three byte pieces, as crucible encodes it. tokenizer_config.json
// sets split_special_tokens, so "</s>" in a text is characters, not eos, as
// in crucible. Pure functions; thread-safe.
#pragma once
#include <string>

#include "core/status.h"
#include "data/tokenizer.h"

namespace crucible::data {

struct HfTokenizerFiles {
  std::string tokenizer_json;           // tokenizer.json
  std::string tokenizer_config_json;    // tokenizer_config.json
  std::string special_tokens_map_json;  // special_tokens_map.json
};

// model_max_length: the model's context (model.seq_len).
// invalid when the model has a piece crucible's format cannot express (a
// user-defined piece, a piece that holds a real space).
Result<HfTokenizerFiles> sentencepiece_to_hf(const Tokenizer& tok, int model_max_length);

}  // namespace crucible::data
