#include "support/hf_texts.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "data/corpus.h"
#include "support/files.h"

namespace crucible::testutil {
namespace {

// Documents a tokenizer comparison can use: valid UTF-8 as they are (the
// tokenizers would repair invalid bytes differently).
bool valid_utf8(std::string_view s) {
  size_t repaired = 0;
  (void)data::sanitize_utf8(s, &repaired);
  return repaired == 0;
}

}  // namespace

std::vector<std::string> fortunes_documents(size_t max_bytes) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator("/usr/share/games/fortunes"))
    if (e.is_regular_file() && e.path().filename().string().find('.') == std::string::npos)
      names.push_back(e.path().string());
  std::sort(names.begin(), names.end());
  std::vector<std::string> docs;
  size_t total = 0;
  for (const auto& n : names) {
    const std::string text = read_file(n);
    data::for_each_fortune(text, [&](size_t, std::string_view doc) {
      if (total >= max_bytes || doc.empty() || !valid_utf8(doc)) return;
      total += doc.size();
      docs.emplace_back(doc);
    });
  }
  return docs;
}

std::vector<std::string> unicode_samples(int n, int max_chars) {
  std::vector<std::string> out = {
      "line one\nline two\n\n\nafter blank lines\r\nwindows\n",
      "runs    of     spaces  and\ttabs\t\t\tand  \t mixed \t",
      "emoji 😀 👍🏽 👨‍👩‍👧 🇫🇷 and text",
      "CJK 中文字符 日本語のテキスト 한국어 텍스트",
      "U+2581 ▁ and ▁▁ and a▁b and ▁ at ends▁",
      "</s> <unk> <0x41> <|endoftext|> are text",
      "it's they're we've I'm you'll he'd IT'S",
      "   leading spaces",
      "trailing spaces   ",
      " ",
      "\n",
      "\t",
  };
  // Pools of code points: ASCII letters and punctuation, Latin-1 and
  // extended Latin, Greek, Cyrillic, Arabic, Devanagari, CJK, kana, Hangul,
  // combining marks, other scripts' digits, emoji, symbols, and whitespace.
  const std::vector<std::pair<uint32_t, uint32_t>> ranges = {
      {0x20, 0x7E},     {0x20, 0x7E},     {0x61, 0x7A},       {0xA0, 0xFF},       {0x100, 0x17F},
      {0x391, 0x3C9},   {0x410, 0x44F},   {0x621, 0x64A},     {0x660, 0x669},     {0x905, 0x939},
      {0x966, 0x96F},   {0x4E00, 0x4FFF}, {0x3041, 0x3096},   {0x30A1, 0x30FA},   {0xAC00, 0xAD00},
      {0x300, 0x36F},   {0xFF10, 0xFF19}, {0x1F600, 0x1F64F}, {0x1F300, 0x1F5FF}, {0x2190, 0x21FF},
      {0x2580, 0x259F}, {0x2000, 0x200D}, {0x2150, 0x218F}};
  const std::vector<uint32_t> spaces = {' ',  ' ',  ' ',  '\n',   '\t',   '\r',  0x0B,
                                        0x0C, 0x85, 0xA0, 0x3000, 0x2028, 0x202F};
  Rng rng(20261205, 7);
  for (int i = 0; i < n; ++i) {
    const int len = 1 + int(rng.next_u32() % uint32_t(max_chars));
    std::string s;
    for (int k = 0; k < len; ++k) {
      const uint32_t r = rng.next_u32() % 100;
      if (r < 20) {
        data::append_utf8(s, spaces[rng.next_u32() % spaces.size()]);
      } else if (r < 24) {
        s += "'";
      } else {
        auto [lo, hi] = ranges[rng.next_u32() % ranges.size()];
        data::append_utf8(s, lo + rng.next_u32() % (hi - lo + 1));
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

void write_texts_json(const std::string& path, const std::vector<std::string>& texts) {
  write_file(path, nlohmann::json(texts).dump());
}

}  // namespace crucible::testutil
