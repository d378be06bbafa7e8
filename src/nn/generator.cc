#include "nn/generator.h"

#include <algorithm>

#include "core/check.h"

namespace crucible::nn {

Generator::Generator(const GPT& model, bool constant_weights)
    : decoder_(model, model.config().seq_len, 1, constant_weights),
      cache_(Tensor::empty({int64_t(decoder_.block_floats(model.config().seq_len))}, DType::f32,
                           "nn.generator.kv_cache")) {}

void Generator::reset() { pos_ = 0; }

const float* Generator::append(const int32_t* tokens, int n) {
  CRUCIBLE_CHECK(n >= 1, "[nn] Generator::append needs at least one token");
  CRUCIBLE_CHECK(pos_ + n <= capacity(), "[nn] Generator::append past model.seq_len (slide the window)");
  const DecodeSeq seq{tokens, n, pos_, &block0_, true};
  const float* logits = decoder_.forward(&seq, 1, KvView{cache_.f32(), capacity()});
  pos_ += n;
  return logits;
}

std::vector<int32_t> generate(Generator& gen, const std::vector<int32_t>& prompt, int n_new,
                              int32_t bos_token, const SamplingConfig& cfg, Rng& rng,
                              const std::function<void(int32_t)>& on_token,
                              const std::function<bool()>& stop) {
  std::vector<int32_t> out;
  if (n_new <= 0) return out;
  out.reserve(size_t(n_new));
  // context: every token of the sequence; the cache holds a suffix of it.
  std::vector<int32_t> context = prompt.empty() ? std::vector<int32_t>{bos_token} : prompt;
  const int cap = gen.capacity();
  const int V = cfg.vocab > 0 ? std::min(cfg.vocab, gen.vocab_size()) : gen.vocab_size();
  gen.reset();
  const int first = int(std::min<size_t>(context.size(), size_t(cap)));
  const float* logits = gen.append(context.data() + context.size() - first, first);
  for (int i = 0; i < n_new; ++i) {
    int32_t tok = sample_token(logits, V, cfg, rng);
    out.push_back(tok);
    context.push_back(tok);
    if (on_token) on_token(tok);
    if (i + 1 == n_new || (stop && stop())) break;
    if (gen.position() < cap) {
      logits = gen.append(&tok, 1);
    } else {
      // Context full: keep the last half (at least the new token) and re-prime.
      const int keep = std::max(1, cap / 2);
      gen.reset();
      logits = gen.append(context.data() + context.size() - keep, keep);
    }
  }
  return out;
}

}  // namespace crucible::nn
