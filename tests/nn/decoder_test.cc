// nn::Decoder over a paged KV cache: several sequences in one call, each at
// its own position, mixing prompt chunks and decode rows, give each
// sequence's logits BITWISE as it gets alone (the contract continuous
// batching rests on, tests/serve), for f32 and bf16 models; block tables may
// scatter a sequence anywhere in the pool.
#include "nn/decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "nn/gpt.h"

namespace crucible {
namespace {

const nn::GPTConfig kCfg{/*n_layer=*/2, /*n_head=*/4, /*n_embd=*/64, /*vocab_size=*/97,
                         /*seq_len=*/40};

// Attention far from uniform (see generator_test.cc): scaled c_attn weights.
nn::GPTPart part_in(DType precision) {
  nn::GPTPart part = nn::GPTPart::whole(kCfg);
  part.precision = precision;
  return part;
}
void init_model(nn::GPT& gpt, DType precision) {
  gpt.init_weights(3);
  auto& P = gpt.params();
  for (const auto& s : P.specs())
    if (s.name.ends_with("c_attn.weight"))
      for (size_t i = 0; i < s.numel; ++i) P.values()[s.offset + i] *= 6.0f;
  if (precision == DType::bf16) P.refresh_bf16();
}

// One sequence: its tokens and how many of them each call appends.
struct Script {
  std::vector<int32_t> tokens;
  std::vector<int> chunks;  // sums to tokens.size()
};

// The logits after each chunk, running the sequence alone in a contiguous cache.
std::vector<std::vector<float>> alone(const nn::GPT& gpt, const Script& s, bool pack) {
  nn::Decoder dec(gpt, kCfg.seq_len, 1, pack);
  Tensor kv = Tensor::empty({int64_t(dec.block_floats(kCfg.seq_len))}, DType::f32, "test");
  const int32_t block0 = 0;
  std::vector<std::vector<float>> out;
  int pos = 0;
  for (int n : s.chunks) {
    nn::DecodeSeq q{s.tokens.data() + pos, n, pos, &block0, true};
    const float* l = dec.forward(&q, 1, {kv.f32(), kCfg.seq_len});
    out.emplace_back(l, l + kCfg.vocab_size);
    pos += n;
  }
  return out;
}

void expect_batched_equals_alone(DType precision, bool pack) {
  nn::GPT gpt(kCfg, part_in(precision));
  init_model(gpt, precision);
  Rng rng(5, 0);
  // Four sequences of different lengths: whole prompts, prompts in chunks,
  // then single decode rows, so that every call mixes the kinds.
  std::vector<Script> scripts = {
      {{}, {7, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
      {{}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
      {{}, {13, 9, 1, 1, 1}},
      {{}, {3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
  };
  for (auto& s : scripts) {
    const int n = std::accumulate(s.chunks.begin(), s.chunks.end(), 0);
    for (int i = 0; i < n; ++i) s.tokens.push_back(int32_t(rng.next_u32() % kCfg.vocab_size));
  }
  // A pool of blocks of 4 positions; each sequence's table takes blocks in a
  // shuffled order, interleaved with the others'.
  const int bt = 4, per_seq = kCfg.seq_len / bt, n_blocks = per_seq * int(scripts.size());
  std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  for (int i = n_blocks - 1; i > 0; --i) std::swap(ids[size_t(i)], ids[rng.next_u32() % uint32_t(i + 1)]);
  std::vector<std::vector<int32_t>> tables(scripts.size());
  for (size_t s = 0; s < scripts.size(); ++s)
    tables[s].assign(ids.begin() + long(s) * per_seq, ids.begin() + long(s + 1) * per_seq);
  nn::Decoder dec(gpt, 64, int(scripts.size()), pack);
  Tensor pool = Tensor::empty({int64_t(dec.block_floats(bt)) * n_blocks}, DType::f32, "test");

  std::vector<std::vector<std::vector<float>>> ref;
  for (const auto& s : scripts) ref.push_back(alone(gpt, s, pack));
  std::vector<size_t> step(scripts.size(), 0);
  std::vector<int> pos(scripts.size(), 0);
  for (int call = 0;; ++call) {
    std::vector<nn::DecodeSeq> seqs;
    std::vector<size_t> who;
    for (size_t s = 0; s < scripts.size(); ++s) {
      if (step[s] == scripts[s].chunks.size()) continue;
      const int n = scripts[s].chunks[step[s]];
      seqs.push_back({scripts[s].tokens.data() + pos[s], n, pos[s], tables[s].data(), true});
      who.push_back(s);
    }
    if (seqs.empty()) break;
    const float* l = dec.forward(seqs.data(), int(seqs.size()), {pool.f32(), bt});
    for (size_t j = 0; j < who.size(); ++j) {
      const size_t s = who[j];
      EXPECT_EQ(std::memcmp(l + j * kCfg.vocab_size, ref[s][step[s]].data(), kCfg.vocab_size * sizeof(float)), 0)
          << "sequence " << s << " chunk " << step[s] << " (call " << call << ", batch of " << seqs.size() << ")";
      pos[s] += scripts[s].chunks[step[s]];
      ++step[s];
    }
  }
}

TEST(Decoder, BatchedSequencesEqualEachAloneBitwiseF32) { expect_batched_equals_alone(DType::f32, false); }
TEST(Decoder, BatchedSequencesEqualEachAloneBitwiseBf16) { expect_batched_equals_alone(DType::bf16, false); }
// The same with the weights packed once (serving, `crucible generate`).
TEST(Decoder, PackedWeightsBatchedEqualEachAloneBitwiseF32) { expect_batched_equals_alone(DType::f32, true); }
TEST(Decoder, PackedWeightsBatchedEqualEachAloneBitwiseBf16) { expect_batched_equals_alone(DType::bf16, true); }

// Packed weights compute what the model's own weights do (to rounding).
TEST(Decoder, PackedWeightsMatchTheModelsWeights) {
  for (DType precision : {DType::f32, DType::bf16}) {
    nn::GPT gpt(kCfg, part_in(precision));
    init_model(gpt, precision);
    Script s{{}, {11, 1, 1}};
    for (int i = 0; i < 13; ++i) s.tokens.push_back(int32_t((i * 29 + 5) % kCfg.vocab_size));
    auto plain = alone(gpt, s, false), packed = alone(gpt, s, true);
    for (size_t c = 0; c < plain.size(); ++c) {
      float scale = 0, err = 0;
      for (size_t v = 0; v < plain[c].size(); ++v) {
        scale = std::max(scale, std::abs(plain[c][v]));
        err = std::max(err, std::abs(plain[c][v] - packed[c][v]));
      }
      EXPECT_LT(err, (precision == DType::bf16 ? 1e-2f : 1e-5f) * scale) << "chunk " << c;
    }
  }
}

// Rows that ask for no logits still fill the cache: a prompt fed in chunks
// without logits, then one row, equals the whole prompt at once.
TEST(Decoder, ChunksWithoutLogitsFillTheCache) {
  nn::GPT gpt(kCfg, part_in(DType::f32));
  init_model(gpt, DType::f32);
  std::vector<int32_t> t(20);
  for (size_t i = 0; i < t.size(); ++i) t[i] = int32_t((i * 37 + 11) % kCfg.vocab_size);
  nn::Decoder dec(gpt, kCfg.seq_len, 1);
  Tensor kv = Tensor::empty({int64_t(dec.block_floats(kCfg.seq_len))}, DType::f32, "test");
  const int32_t b0 = 0;
  nn::DecodeSeq whole{t.data(), 20, 0, &b0, true};
  const float* w = dec.forward(&whole, 1, {kv.f32(), kCfg.seq_len});
  const std::vector<float> ref(w, w + kCfg.vocab_size);
  nn::DecodeSeq a{t.data(), 12, 0, &b0, false}, b{t.data() + 12, 7, 12, &b0, false}, c{t.data() + 19, 1, 19, &b0, true};
  dec.forward(&a, 1, {kv.f32(), kCfg.seq_len});
  dec.forward(&b, 1, {kv.f32(), kCfg.seq_len});
  const float* l = dec.forward(&c, 1, {kv.f32(), kCfg.seq_len});
  EXPECT_EQ(std::memcmp(l, ref.data(), kCfg.vocab_size * sizeof(float)), 0);
}

}  // namespace
}  // namespace crucible
