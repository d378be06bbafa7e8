#include "data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <xxhash.h>

#include <cctype>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/check.h"
#include "core/file_io.h"

namespace crucible::data {
namespace {

namespace spm = sentencepiece;

// Trainer input is cut into sentences of at most this many bytes. SentencePiece skips
// longer sentences outright (max_sentence_length), and a whole text file can be one
// document; a piece never spans a cut, and cuts fall after a newline where possible.
constexpr size_t kMaxTrainSentenceBytes = 8192;
// At most this many sentences are sampled for training (SentencePiece's reservoir
// sampling, seeded below), which bounds training time and memory on large corpora.
constexpr int kMaxTrainSentences = 2'000'000;
constexpr unsigned kTrainSeed = 0x5eed;
constexpr std::string_view kLowerBlock = "\xE2\x96\x81";  // U+2581, SentencePiece's space mark

// Where to cut `doc` at `pos`: the whole rest if short enough; else after the last
// newline, else before the last space, else at the last UTF-8 character boundary.
size_t chunk_length(std::string_view doc, size_t pos) {
  std::string_view rest = doc.substr(pos);
  if (rest.size() <= kMaxTrainSentenceBytes) return rest.size();
  std::string_view window = rest.substr(0, kMaxTrainSentenceBytes);
  size_t cut = window.rfind('\n');
  if (cut != std::string_view::npos && cut > 0) return cut + 1;
  cut = window.rfind(' ');
  if (cut != std::string_view::npos && cut > 0) return cut;
  size_t len = kMaxTrainSentenceBytes;
  while (len > 1 && (uint8_t(rest[len]) & 0xC0) == 0x80) --len;
  return len;
}

// Streams the documents to the trainer as chunks, without copying the corpus. Newlines
// stay inside the sentences: the trainer does not split its iterator input into lines,
// so '\n' becomes a character of the vocabulary like any other. ('\t' is the one
// character SentencePiece never puts in a piece, reserving it as a boundary marker; a tab
// is always its byte piece <0x09>, which still costs one token.)
class DocumentChunks : public spm::SentenceIterator {
 public:
  explicit DocumentChunks(const std::vector<std::string>& docs) : docs_(docs) { Next(); }
  bool done() const override { return doc_ >= docs_.size(); }
  void Next() override {
    for (; doc_ < docs_.size(); ++doc_, pos_ = 0) {
      const std::string& d = docs_[doc_];
      if (pos_ < d.size()) {
        size_t len = chunk_length(d, pos_);
        chunk_.assign(d, pos_, len);
        pos_ += len;
        return;
      }
    }
  }
  const std::string& value() const override { return chunk_; }
  spm::util::Status status() const override { return spm::util::Status(); }

 private:
  const std::vector<std::string>& docs_;
  size_t doc_ = 0, pos_ = 0;
  std::string chunk_;
};

// SentencePiece messages start with "./src/file.cc(660) [(condition)] "; keep the rest.
std::string spm_message(const spm::util::Status& s) {
  std::string msg = s.error_message();
  size_t p = msg.find("] ");
  if (msg.rfind("./", 0) == 0 && p != std::string::npos) msg.erase(0, p + 2);
  return msg;
}

// The integer that follows `marker` in `msg`, or "" if there is none.
std::string number_after(const std::string& msg, std::string_view marker) {
  size_t p = msg.find(marker);
  if (p == std::string::npos) return "";
  p += marker.size();
  size_t e = p;
  while (e < msg.size() && std::isdigit(static_cast<unsigned char>(msg[e]))) ++e;
  return msg.substr(p, e - p);
}

Status training_error(const spm::util::Status& s, int vocab_size) {
  const std::string msg = spm_message(s);
  const std::string head = "[data] tokenizer: model.vocab_size = " + std::to_string(vocab_size);
  if (msg.find("Vocabulary size too high") != std::string::npos) {
    std::string max = number_after(msg, "<= ");
    return Status::invalid(head + " is too large for this corpus" +
                           (max.empty() ? "" : " (at most " + max + ")") +
                           " (SentencePiece: " + msg + ")");
  }
  if (msg.find("smaller than required_chars") != std::string::npos) {
    std::string min = number_after(msg, " vs ");
    return Status::invalid(head + " is too small for this corpus" +
                           (min.empty() ? "" : " (at least " + min + ")") +
                           ": it must hold 256 byte pieces, <unk>, </s> and the corpus' "
                           "characters (SentencePiece: " +
                           msg + ")");
  }
  return Status::internal("[data] tokenizer: training failed: " + msg);
}

}  // namespace

Tokenizer::Tokenizer() : sp_(std::make_unique<spm::SentencePieceProcessor>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Status Tokenizer::train(const std::vector<std::string>& docs, int vocab_size,
                        const std::string& model_path, int num_threads) {
  if (docs.empty()) return Status::invalid("[data] tokenizer: no documents to train on");
  if (vocab_size <= 0)
    return Status::invalid("[data] tokenizer: model.vocab_size = " + std::to_string(vocab_size) +
                           " must be positive");
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(vocab_size)},
      {"byte_fallback", "true"},
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "false"},
      {"remove_extra_whitespaces", "false"},
      {"split_digits", "true"},
      // Runs of spaces (indented poems, ASCII art, code) become pieces of their own
      // instead of one "▁" token per space: ~1% fewer tokens on fortunes.
      {"allow_whitespace_only_pieces", "true"},
      {"character_coverage", "0.9995"},
      {"unk_id", std::to_string(kUnkId)},
      {"eos_id", std::to_string(kEosId)},
      {"bos_id", "-1"},
      {"pad_id", "-1"},
      {"max_sentence_length", std::to_string(kMaxTrainSentenceBytes)},
      {"input_sentence_size", std::to_string(kMaxTrainSentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(num_threads > 0 ? num_threads : 1)},
      {"minloglevel", "2"},  // errors come back as a Status; INFO/WARNING is noise
  };
  spm::SetRandomGeneratorSeed(kTrainSeed);  // the sentence sampling is then reproducible
  DocumentChunks sentences(docs);
  std::string model;
  spm::util::Status s = spm::SentencePieceTrainer::Train(args, &sentences, &model);
  if (!s.ok()) return training_error(s, vocab_size);

  spm::SentencePieceProcessor check;
  s = check.LoadFromSerializedProto(model);
  if (!s.ok())
    return Status::internal("[data] tokenizer: trained model does not load: " + spm_message(s));
  if (check.GetPieceSize() != vocab_size || check.eos_id() != kEosId)
    return Status::internal("[data] tokenizer: trained model has " +
                            std::to_string(check.GetPieceSize()) + " pieces and eos id " +
                            std::to_string(check.eos_id()) + ", expected " +
                            std::to_string(vocab_size) + " and " + std::to_string(kEosId));
  return write_file_atomic(model_path, model);
}

Result<Tokenizer> Tokenizer::load(const std::string& model_path) {
  Tokenizer t;
  // Read here, parsed from memory: SentencePiece's own reader throws
  // std::ios_base::failure on a directory and says "()" on an empty file.
  auto bytes = read_file(model_path);
  if (!bytes) {
    const std::string& why = bytes.status().message();
    return Status::not_found("[data] tokenizer model " + model_path + " cannot be opened (" +
                             why.substr(why.rfind(": ") + 2) + ")");
  }
  if (bytes->empty()) return Status::corrupt("[data] tokenizer model " + model_path + " is empty");
  spm::util::Status s = t.sp_->LoadFromSerializedProto(*bytes);
  if (!s.ok()) {
    if (s.code() == spm::util::StatusCode::kNotFound)
      return Status::not_found("[data] tokenizer model " + model_path + " cannot be opened (" +
                               spm_message(s) + ")");
    return Status::corrupt("[data] tokenizer model " + model_path +
                           " is not a valid SentencePiece model (" + spm_message(s) + ")");
  }
  if (t.sp_->eos_id() < 0)
    return Status::invalid("[data] tokenizer model " + model_path +
                           " has no end-of-document piece </s>");
  const std::string proto = t.sp_->serialized_model_proto();
  t.fingerprint_ = XXH64(proto.data(), proto.size(), 0);
  for (char byte : kLowerBlock) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", unsigned(uint8_t(byte)));
    int id = t.sp_->PieceToId(name);
    if (!t.sp_->IsByte(id)) {
      t.lower_block_bytes_.clear();
      break;
    }
    t.lower_block_bytes_.push_back(id);
  }
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  std::vector<int> ids;
  auto encode_part = [&](std::string_view part) {
    if (part.empty()) return;
    spm::util::Status s = sp_->Encode(part, &ids);
    CRUCIBLE_CHECK(s.ok(), "SentencePiece Encode fails only without a loaded model");
    out.insert(out.end(), ids.begin(), ids.end());
  };
  size_t pos = 0;
  while (!lower_block_bytes_.empty()) {
    size_t hit = text.find(kLowerBlock, pos);
    if (hit == std::string_view::npos) break;
    encode_part(text.substr(pos, hit - pos));
    out.insert(out.end(), lower_block_bytes_.begin(), lower_block_bytes_.end());
    pos = hit + kLowerBlock.size();
  }
  encode_part(text.substr(pos));
  return out;
}

std::string Tokenizer::decode(const int32_t* ids, size_t n) const {
  const int size = sp_->GetPieceSize();
  std::vector<int> v(ids, ids + n);
  for (int id : v) CRUCIBLE_CHECK(id >= 0 && id < size, "token id within the vocabulary");
  std::string out;
  spm::util::Status s = sp_->Decode(v, &out);
  CRUCIBLE_CHECK(s.ok(), "SentencePiece Decode of in-range ids succeeds");
  return out;
}

std::string Tokenizer::piece(int32_t id) const {
  CRUCIBLE_CHECK(id >= 0 && id < sp_->GetPieceSize(), "token id within the vocabulary");
  return sp_->IdToPiece(id);
}

int Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }
int Tokenizer::eos_id() const { return sp_->eos_id(); }
bool Tokenizer::is_byte(int32_t id) const { return sp_->IsByte(id); }
bool Tokenizer::is_special(int32_t id) const {
  return sp_->IsControl(id) || sp_->IsUnknown(id) || sp_->IsUnused(id);
}

}  // namespace crucible::data
