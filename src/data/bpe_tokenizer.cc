#include "data/bpe_tokenizer.h"

#include "data/corpus.h"

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <climits>
#include <nlohmann/json.hpp>
#include <queue>

#include "core/check.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "data/gpt2_pretokenize.h"

namespace crucible::data {
namespace {

constexpr const char* kEndOfText = "<|endoftext|>";
constexpr size_t kMaxCacheEntries = 1 << 16;  // cleared when full: bounded memory


// encoder.py's bytes_to_unicode: printable Latin-1 bytes stand for
// themselves, the other 68 for U+0100 upwards, in byte order.
const std::array<std::string, 256>& byte_chars() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      append_utf8(t[b], printable ? b : next++);
    }
    return t;
  }();
  return table;
}

// The inverse: a stand-in character's code point -> its byte (-1: none).
int byte_of(uint32_t c) {
  static const std::vector<int> inverse = [] {
    std::vector<int> v(512, -1);
    for (int b = 0; b < 256; ++b) {
      const std::string& s = byte_chars()[size_t(b)];
      uint32_t cp =
          s.size() == 1 ? uint8_t(s[0]) : ((uint8_t(s[0]) & 0x1F) << 6) | (uint8_t(s[1]) & 0x3F);
      v[cp] = b;
    }
    return v;
  }();
  return c < inverse.size() ? inverse[c] : -1;
}

uint64_t pair_key(int32_t l, int32_t r) { return (uint64_t(uint32_t(l)) << 32) | uint32_t(r); }

}  // namespace

const std::string& gpt2_byte_char(uint8_t b) { return byte_chars()[b]; }

BpeTokenizer::BpeTokenizer() : cache_mu_(std::make_unique<std::mutex>()) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

Result<BpeTokenizer> BpeTokenizer::from_parts(
    std::vector<std::pair<std::string, int32_t>> vocab,
    std::vector<std::pair<std::string, std::string>> merges, const std::string& origin) {
  auto bad = [&](const std::string& why) {
    return Status::invalid("[data] " + origin + ": " + why);
  };
  BpeTokenizer t;
  if (vocab.empty()) return bad("the vocabulary is empty");
  t.tokens_.resize(vocab.size());
  std::vector<bool> seen(vocab.size());
  for (auto& [text, id] : vocab) {
    if (id < 0 || size_t(id) >= vocab.size() || seen[size_t(id)])
      return bad("token ids are not 0.." + std::to_string(vocab.size() - 1) + " each once (id " +
                 std::to_string(id) + ")");
    seen[size_t(id)] = true;
    t.ids_.emplace(text, id);
    t.tokens_[size_t(id)] = std::move(text);
  }
  for (int b = 0; b < 256; ++b) {
    auto it = t.ids_.find(byte_chars()[size_t(b)]);
    if (it == t.ids_.end())
      return bad("byte " + std::to_string(b) + " ('" + byte_chars()[size_t(b)] +
                 "') is not in the vocabulary: not GPT-2's byte-level BPE");
    t.byte_id_[b] = it->second;
  }
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [l, r] = merges[rank];
    auto li = t.ids_.find(l), ri = t.ids_.find(r), mi = t.ids_.find(l + r);
    if (li == t.ids_.end() || ri == t.ids_.end() || mi == t.ids_.end())
      return bad("merge " + std::to_string(rank + 1) + " ('" + l + "' '" + r +
                 "') names a token not in the vocabulary");
    t.ranks_.emplace(pair_key(li->second, ri->second),
                     std::pair{int32_t(rank), mi->second});  // first rank wins
  }
  auto eos = t.ids_.find(kEndOfText);
  if (eos == t.ids_.end())
    return bad(std::string("no ") + kEndOfText + " token (GPT-2's end of document)");
  t.eos_id_ = eos->second;
  t.special_.assign(t.tokens_.size(), false);
  t.special_[size_t(t.eos_id_)] = true;
  t.merges_ = std::move(merges);
  // The fingerprint of the canonical files save() writes.
  nlohmann::json vj = nlohmann::json::object();
  for (size_t id = 0; id < t.tokens_.size(); ++id) vj[t.tokens_[id]] = id;
  std::string text = vj.dump() + "\n#version: 0.2\n";
  for (const auto& [l, r] : t.merges_) text += l + " " + r + "\n";
  t.fingerprint_ = XXH64(text.data(), text.size(), 0);
  return t;
}

Result<BpeTokenizer> BpeTokenizer::load(const std::string& vocab_json,
                                        const std::string& merges_txt) {
  auto vj = read_json(vocab_json);
  if (!vj) return Status::invalid("[data] " + vj.status().message());
  if (!vj->is_object())
    return Status::invalid("[data] " + vocab_json + ": not a JSON object of token -> id");
  std::vector<std::pair<std::string, int32_t>> vocab;
  for (const auto& [k, v] : vj->items()) {
    if (!v.is_number_integer())
      return Status::invalid("[data] " + vocab_json + ": the id of '" + k + "' is not an integer");
    vocab.emplace_back(k, v.get<int32_t>());
  }
  auto text = read_file(merges_txt);
  if (!text) return Status::invalid("[data] " + text.status().message());
  std::vector<std::pair<std::string, std::string>> merges;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text->size();) {
    size_t end = text->find('\n', pos);
    if (end == std::string::npos) end = text->size();
    std::string line = text->substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() ||
        line.find(' ', sp + 1) != std::string::npos)
      return Status::invalid("[data] " + merges_txt + ":" + std::to_string(line_no) +
                             ": not a merge 'A B'");
    merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
  }
  return from_parts(std::move(vocab), std::move(merges), vocab_json);
}

Result<BpeTokenizer> BpeTokenizer::load_tokenizer_json(const std::string& path) {
  auto j = read_json(path);
  if (!j) return Status::invalid("[data] " + j.status().message());
  auto bad = [&](const std::string& why) {
    return Status::invalid("[data] " + path + ": " + why +
                           " (only GPT-2's byte-level BPE is read)");
  };
  const nlohmann::json& model = json_object_or_null(*j, "model");
  if (json_string_or(model, "type", "") != "BPE") return bad("model.type is not \"BPE\"");
  if (j->contains("normalizer") && !(*j)["normalizer"].is_null()) return bad("it has a normalizer");
  const nlohmann::json& pre = json_object_or_null(*j, "pre_tokenizer");
  if (json_string_or(pre, "type", "") != "ByteLevel" || pre.value("add_prefix_space", false) ||
      !pre.value("use_regex", true))
    return bad("pre_tokenizer is not ByteLevel without a prefix space");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(k) && !model[k].is_null() && model[k] != "")
      return bad(std::string("model.") + k + " is set");
  const nlohmann::json& vj = json_object_or_null(model, "vocab");
  if (!vj.is_object()) return bad("model.vocab is not an object");
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::unordered_map<std::string, int32_t> have;
  for (const auto& [k, v] : vj.items()) {
    if (!v.is_number_integer()) return bad("the id of '" + k + "' is not an integer");
    vocab.emplace_back(k, v.get<int32_t>());
    have.emplace(k, v.get<int32_t>());
  }
  std::vector<int32_t> specials;
  if (j->contains("added_tokens") && (*j)["added_tokens"].is_array()) {
    for (const auto& a : (*j)["added_tokens"]) {
      const std::string content = json_string_or(a, "content", "");
      const int64_t id = json_int_or(a, "id", -1);
      if (content.empty() || id < 0) return bad("an added token has no content or id");
      auto it = have.find(content);
      if (it == have.end()) {
        vocab.emplace_back(content, int32_t(id));
        have.emplace(content, int32_t(id));
      } else if (it->second != id) {
        return bad("added token '" + content + "' has id " + std::to_string(id) + " and vocab id " +
                   std::to_string(it->second));
      }
      if (a.value("special", false)) specials.push_back(int32_t(id));
    }
  }
  std::vector<std::pair<std::string, std::string>> merges;
  const nlohmann::json& mj = model.contains("merges") ? model["merges"] : nlohmann::json();
  if (!mj.is_array()) return bad("model.merges is not an array");
  for (const auto& m : mj) {
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return bad("merge '" + s + "' is not 'A B'");
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return bad("a merge is neither 'A B' nor [A, B]");
    }
  }
  auto t = from_parts(std::move(vocab), std::move(merges), path);
  if (!t) return t;
  for (int32_t id : specials) t->special_[size_t(id)] = true;
  return t;
}

Status BpeTokenizer::save(const std::string& dir) const {
  nlohmann::json vj = nlohmann::json::object();
  for (size_t id = 0; id < tokens_.size(); ++id) vj[tokens_[id]] = id;
  CRUCIBLE_RETURN_IF_ERROR(write_file_atomic(dir + "/vocab.json", vj.dump() + "\n"));
  std::string text = "#version: 0.2\n";
  for (const auto& [l, r] : merges_) text += l + " " + r + "\n";
  return write_file_atomic(dir + "/merges.txt", text);
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  // Merge the lowest-ranked adjacent pair (the leftmost of equals) until no
  // ranked pair is left. Symbols form a linked list over the piece's bytes
  // (a symbol keeps the position of its first byte); candidate pairs wait in
  // a heap by (rank, position) and are dropped when stale: O(n log n), so a
  // pre-token of a million repeated characters is no quadratic trap.
  const int n = int(piece.size());
  struct Sym {
    int32_t id;
    int prev, next;  // -1: none
  };
  std::vector<Sym> sym(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    sym[size_t(i)] = {byte_id_[uint8_t(piece[size_t(i)])], i - 1, i + 1 < n ? i + 1 : -1};
  struct Candidate {
    int32_t rank;
    int pos;
    int32_t left, right, merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto offer = [&](int pos) {
    if (pos < 0 || sym[size_t(pos)].next < 0) return;
    const int32_t l = sym[size_t(pos)].id, r = sym[size_t(sym[size_t(pos)].next)].id;
    auto it = ranks_.find(pair_key(l, r));
    if (it != ranks_.end()) heap.push({it->second.first, pos, l, r, it->second.second});
  };
  for (int i = 0; i + 1 < n; ++i) offer(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Sym& s = sym[size_t(c.pos)];
    // Stale: the left symbol was merged away or changed, or its right neighbour did.
    if (s.id != c.left || s.next < 0 || sym[size_t(s.next)].id != c.right) continue;
    const int gone = s.next;
    s.id = c.merged;
    s.next = sym[size_t(gone)].next;
    if (s.next >= 0) sym[size_t(s.next)].prev = c.pos;
    sym[size_t(gone)].id = -1;  // dead
    offer(s.prev);
    offer(c.pos);
  }
  for (int i = n > 0 ? 0 : -1; i >= 0; i = sym[size_t(i)].next) out.push_back(sym[size_t(i)].id);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  for (std::string_view piece : gpt2_pretokenize(text)) {
    {
      std::lock_guard<std::mutex> lock(*cache_mu_);
      auto it = cache_.find(std::string(piece));
      if (it != cache_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    const size_t first = out.size();
    encode_piece(piece, out);
    std::lock_guard<std::mutex> lock(*cache_mu_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::string(piece),
                   std::vector<int32_t>(out.begin() + std::ptrdiff_t(first), out.end()));
  }
  return out;
}

std::string BpeTokenizer::decode(const int32_t* ids, size_t n) const {
  std::string out;
  for (size_t k = 0; k < n; ++k) {
    CRUCIBLE_CHECK(ids[k] >= 0 && size_t(ids[k]) < tokens_.size(),
                   "token id within the vocabulary");
    if (special_[size_t(ids[k])]) continue;
    const std::string& t = tokens_[size_t(ids[k])];
    for (size_t i = 0; i < t.size();) {
      // One UTF-8 character of the token: its byte stand-in, or itself.
      const uint8_t c0 = uint8_t(t[i]);
      const size_t len = c0 < 0x80 ? 1 : c0 < 0xE0 ? 2 : c0 < 0xF0 ? 3 : 4;
      uint32_t cp = len == 1                       ? c0
                    : len == 2 && i + 1 < t.size() ? ((c0 & 0x1F) << 6) | (uint8_t(t[i + 1]) & 0x3F)
                                                   : 0x10000;
      const int b = byte_of(cp);
      if (b >= 0)
        out += char(b);
      else
        out.append(t, i, len);
      i += len;
    }
  }
  return out;
}

}  // namespace crucible::data
