// Decode-time attention over a paged KV cache (kernels/isa/attention_paged.cc)
// against the double reference, on every ISA this CPU runs: rows at
// different positions (1 key up to several blocks, lengths not multiples of
// the vector width or the block), heads of 8 to 96 floats, block tables in a
// shuffled order; and each row's result bitwise the same alone as in the batch.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/reference.h"
#include "support/kernel_harness.h"

namespace crucible {
namespace {

using testing::Compare;

struct Paged {
  int R, C, NH, bt, blocks_per_row;
  std::vector<float> q, kv;
  std::vector<std::vector<int32_t>> tables;
  std::vector<const int32_t*> table_ptrs;
  std::vector<int32_t> pos;
  size_t stride;  // floats per block: keys and values of bt positions (one layer)
};

Paged make(const testing::KernelShape& s, Rng& rng, float mag) {
  Paged p{s[0], s[1], s[2], s[3], s[4], {}, {}, {}, {}, {}, 0};
  p.stride = size_t(2) * p.bt * p.C;
  const int n_blocks = p.R * p.blocks_per_row;
  p.q = testing::random_vector(rng, size_t(p.R) * 3 * p.C, -mag, mag);  // ldq = 3C, as qkv rows
  p.kv = testing::random_vector(rng, size_t(n_blocks) * p.stride, -mag, mag);
  std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
  for (int i = 0; i < n_blocks; ++i) ids[size_t(i)] = i;
  for (int i = n_blocks - 1; i > 0; --i) std::swap(ids[size_t(i)], ids[rng.next_u32() % uint32_t(i + 1)]);
  for (int r = 0; r < p.R; ++r) {
    p.tables.emplace_back(ids.begin() + long(r) * p.blocks_per_row, ids.begin() + long(r + 1) * p.blocks_per_row);
    p.pos.push_back(r == 0 ? 0 : int32_t(rng.next_u32() % uint32_t(p.blocks_per_row * p.bt)));
  }
  for (auto& t : p.tables) p.table_ptrs.push_back(t.data());
  return p;
}

TEST(AttentionPaged, MatchesReferenceAndEachRowAlone) {
  // {R, C, NH, bt, blocks per row}
  testing::check_kernel(
      "attention_paged", {{1, 8, 1, 4, 1}, {5, 24, 3, 16, 3}, {9, 64, 4, 16, 8}, {4, 192, 2, 7, 10}, {3, 96, 12, 5, 4}},
      [](const kernels::KernelTable& k, const testing::KernelShape& s, Rng& rng) {
        Paged p = make(s, rng, 1.5f);
        std::vector<float> out(size_t(p.R) * p.C), ref(out.size()), alone(out.size());
        k.attention_paged(out.data(), p.q.data(), 3 * p.C, p.kv.data(), p.stride, p.bt, p.table_ptrs.data(),
                          p.pos.data(), p.R, p.C, p.NH);
        kernels::ref::attention_paged(ref.data(), p.q.data(), 3 * p.C, p.kv.data(), p.stride, p.bt,
                                      p.table_ptrs.data(), p.pos.data(), p.R, p.C, p.NH);
        for (int r = 0; r < p.R; ++r)
          k.attention_paged(alone.data() + size_t(r) * p.C, p.q.data() + size_t(r) * 3 * p.C, 3 * p.C,
                            p.kv.data(), p.stride, p.bt, p.table_ptrs.data() + r, p.pos.data() + r, 1, p.C,
                            p.NH);
        EXPECT_EQ(std::memcmp(out.data(), alone.data(), out.size() * sizeof(float)), 0)
            << k.isa << ": a row's result depends on the other rows";
        return std::vector<Compare>{{"out", out, ref, 2e-5, 2e-4}};
      });
}

}  // namespace
}  // namespace crucible
