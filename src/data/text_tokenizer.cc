#include "data/text_tokenizer.h"

#include <filesystem>

#include "data/bpe_tokenizer.h"
#include "data/tokenizer.h"

namespace crucible::data {
namespace {

// Either tokenizer behind the one interface; K names its kind.
template <typename Tok, TextTokenizer::Kind K>
class TextOf final : public TextTokenizer {
 public:
  TextOf(Tok tok, std::string path) : tok_(std::move(tok)), path_(std::move(path)) {}
  Kind kind() const override { return K; }
  std::vector<int32_t> encode(std::string_view text) const override { return tok_.encode(text); }
  std::string decode(const int32_t* ids, size_t n) const override { return tok_.decode(ids, n); }
  int vocab_size() const override { return tok_.vocab_size(); }
  int eos_id() const override { return tok_.eos_id(); }
  uint64_t fingerprint() const override { return tok_.fingerprint(); }
  const std::string& path() const override { return path_; }

 private:
  Tok tok_;
  std::string path_;
};
using SentencePieceText = TextOf<Tokenizer, TextTokenizer::Kind::kSentencePiece>;
using ByteLevelText = TextOf<BpeTokenizer, TextTokenizer::Kind::kByteLevelBpe>;

}  // namespace

Result<std::unique_ptr<TextTokenizer>> load_run_tokenizer(const std::string& run_dir) {
  const std::string spm = run_dir + "/tokenizer.model";
  if (std::filesystem::exists(spm)) {
    auto tok = Tokenizer::load(spm);
    if (!tok) return tok.status();
    return std::unique_ptr<TextTokenizer>(
        std::make_unique<SentencePieceText>(std::move(*tok), spm));
  }
  const std::string vocab = run_dir + "/vocab.json", merges = run_dir + "/merges.txt";
  if (std::filesystem::exists(vocab)) {
    auto tok = BpeTokenizer::load(vocab, merges);
    if (!tok) return tok.status();
    return std::unique_ptr<TextTokenizer>(std::make_unique<ByteLevelText>(std::move(*tok), vocab));
  }
  return Status::not_found("[data] " + run_dir +
                           " has no tokenizer (tokenizer.model, or vocab.json with merges.txt)");
}

}  // namespace crucible::data
