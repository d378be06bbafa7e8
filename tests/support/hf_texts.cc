#include "support/hf_texts.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "support/files.h"

namespace crucible::testutil {
namespace {

std::string utf8(uint32_t c) {
  std::string s;
  if (c < 0x80) {
    s += char(c);
  } else if (c < 0x800) {
    s += char(0xC0 | (c >> 6));
    s += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += char(0xE0 | (c >> 12));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  } else {
    s += char(0xF0 | (c >> 18));
    s += char(0x80 | ((c >> 12) & 0x3F));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  }
  return s;
}

bool valid_utf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
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
    for (size_t pos = 0; pos < text.size() && total < max_bytes;) {
      size_t end = text.find("\n%\n", pos);
      if (end == std::string::npos) end = text.size();
      std::string doc = text.substr(pos, end - pos);
      pos = end + 3;
      if (doc.empty() || !valid_utf8(doc)) continue;
      total += doc.size();
      docs.push_back(std::move(doc));
    }
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
        s += utf8(spaces[rng.next_u32() % spaces.size()]);
      } else if (r < 24) {
        s += "'";
      } else {
        auto [lo, hi] = ranges[rng.next_u32() % ranges.size()];
        s += utf8(lo + rng.next_u32() % (hi - lo + 1));
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
