#include "serve/text_stream.h"

#include <algorithm>
#include <utility>

namespace crucible::serve {
namespace {

// Bytes at the end of s that begin a UTF-8 character not yet complete.
size_t incomplete_utf8_tail(const std::string& s) {
  for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

TextStream::TextStream(const data::TextTokenizer& tok, std::vector<std::string> stop, bool eos_ends)
    : tok_(tok), stop_(std::move(stop)), eos_ends_(eos_ends) {
  stop_.erase(std::remove(stop_.begin(), stop_.end(), std::string()), stop_.end());
}

std::string TextStream::add(const std::vector<int32_t>& ids) {
  if (stopped_ || ended_) return {};
  for (int32_t id : ids) {
    if (ended_) break;
    ids_.push_back(id);
    if (id != tok_.eos_id()) text_ids_.push_back(id);
    else if (eos_ends_) ended_ = true;
  }
  const std::string text = tok_.decode(text_ids_);
  // Later tokens changed what was sent (a tokenizer that rewrites a prefix):
  // wait until the text extends it again.
  if (text.compare(0, sent_.size(), sent_) != 0) return {};
  // The earliest stop sequence that starts after nothing already sent.
  size_t cut = std::string::npos, cut_end = 0;  // where it starts and ends
  for (const auto& s : stop_) {
    const size_t from = sent_.size() >= s.size() ? sent_.size() - s.size() + 1 : 0;
    const size_t at = text.find(s, from);
    if (at != std::string::npos && std::max(at, sent_.size()) < cut) {
      cut = std::max(at, sent_.size());
      cut_end = at + s.size();
    }
  }
  size_t end = text.size();
  if (cut != std::string::npos) {
    stopped_ = true;
    end = cut;
    // Keep the ids that produced the text up to the stop, the one that
    // completed it included.
    for (size_t n = 1; n <= text_ids_.size(); ++n) {
      if (tok_.decode(text_ids_.data(), n).size() >= cut_end || n == text_ids_.size()) {
        ids_.resize(n);
        break;
      }
    }
  } else {
    end -= incomplete_utf8_tail(text);
    // Hold back a tail that could begin a stop sequence.
    size_t hold = 0;
    for (const auto& s : stop_)
      for (size_t k = std::min(s.size() - 1, end); k > hold; --k)
        if (text.compare(end - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    end -= hold;
  }
  if (end <= sent_.size()) return {};
  std::string delta = text.substr(sent_.size(), end - sent_.size());
  sent_.append(delta);
  return delta;
}

std::string TextStream::finish() {
  if (stopped_) return {};
  const std::string text = tok_.decode(text_ids_);
  if (text.size() <= sent_.size() || text.compare(0, sent_.size(), sent_) != 0) return {};
  std::string delta = text.substr(sent_.size());
  sent_ = text;
  return delta;
}

}  // namespace crucible::serve
