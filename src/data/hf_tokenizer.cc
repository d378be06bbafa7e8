#include "data/hf_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace crucible::data {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581

std::string unmark_spaces(std::string piece) {
  for (size_t p = piece.find(kSpaceMark); p != std::string::npos; p = piece.find(kSpaceMark, p + 1))
    piece.replace(p, kSpaceMark.size(), " ");
  return piece;
}

nlohmann::json added_token(int id, const std::string& text) {
  return {{"id", id},        {"content", text},     {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

}  // namespace

Result<HfTokenizerFiles> sentencepiece_to_hf(const Tokenizer& tok, int model_max_length) {
  const int V = tok.vocab_size();
  nlohmann::json vocab = nlohmann::json::object();
  // The learned pieces by text (byte and special pieces take part in no merge).
  std::unordered_map<std::string, int> normal;
  nlohmann::json added = nlohmann::json::array();
  std::string unk;
  for (int id = 0; id < V; ++id) {
    std::string piece = tok.piece(id);
    if (tok.is_special(id)) {
      added.push_back(added_token(id, piece));
      if (id == Tokenizer::kUnkId) unk = piece;
    } else if (!tok.is_byte(id)) {
      if (piece.find(' ') != std::string::npos)
        return Status::invalid("[export] tokenizer piece " + std::to_string(id) +
                               " holds a space, which SentencePiece pieces never do");
      piece = unmark_spaces(std::move(piece));
      normal.emplace(piece, id);
    }
    if (vocab.contains(piece))
      return Status::invalid("[export] tokenizer pieces " +
                             std::to_string(vocab[piece].get<int>()) + " and " +
                             std::to_string(id) + " have the same text '" + piece + "'");
    vocab[piece] = id;
  }
  // Every split of a learned piece into two learned pieces, at character
  // boundaries, ranked by (the union's id, the left's, the right's).
  std::vector<std::tuple<int, int, int>> merges;
  for (const auto& [text, id] : normal) {
    for (size_t cut = 1; cut < text.size(); ++cut) {
      if ((uint8_t(text[cut]) & 0xC0) == 0x80) continue;  // inside a UTF-8 character
      auto l = normal.find(text.substr(0, cut)), r = normal.find(text.substr(cut));
      if (l != normal.end() && r != normal.end()) merges.emplace_back(id, l->second, r->second);
    }
  }
  std::sort(merges.begin(), merges.end());
  nlohmann::json merge_list = nlohmann::json::array();
  std::vector<std::string> text_of(static_cast<size_t>(V));
  for (const auto& [text, id] : normal) text_of[size_t(id)] = text;
  for (const auto& [id, l, r] : merges)
    merge_list.push_back(nlohmann::json::array({text_of[size_t(l)], text_of[size_t(r)]}));

  const std::string eos = tok.piece(tok.eos_id());
  nlohmann::json tj = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", nullptr},
      {"post_processor", nullptr},
      {"decoder",
       {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", unk.empty() ? nlohmann::json(nullptr) : nlohmann::json(unk)},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", true},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merge_list}}},
  };
  nlohmann::json config = {
      {"tokenizer_class", "PreTrainedTokenizerFast"},
      {"model_max_length", model_max_length},
      {"eos_token", eos},
      {"unk_token", unk.empty() ? nlohmann::json(nullptr) : nlohmann::json(unk)},
      {"bos_token", nullptr},
      {"pad_token", nullptr},
      {"add_bos_token", false},
      {"add_eos_token", false},
      {"clean_up_tokenization_spaces", false},
      {"split_special_tokens", true},
  };
  nlohmann::json special = {{"eos_token", eos}};
  if (!unk.empty()) special["unk_token"] = unk;
  return HfTokenizerFiles{tj.dump(1) + "\n", config.dump(2) + "\n", special.dump(2) + "\n"};
}

}  // namespace crucible::data
