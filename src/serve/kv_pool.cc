#include "serve/kv_pool.h"

#include "core/check.h"

namespace crucible::serve {

KvBlockPool::KvBlockPool(int n_blocks, int block_tokens, size_t block_floats)
    : storage_(Tensor::empty({int64_t(n_blocks) * int64_t(block_floats)}, DType::f32, "serve.kv_cache")),
      block_tokens_(block_tokens) {
  CRUCIBLE_CHECK(n_blocks >= 1 && block_tokens >= 1, "[serve] KvBlockPool needs blocks");
  free_.reserve(size_t(n_blocks));
  // Lowest ids on top: a lightly loaded server reuses the same warm blocks.
  for (int b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

bool KvBlockPool::take(int n, std::vector<int32_t>& table) {
  if (n > int(free_.size())) return false;
  for (int i = 0; i < n; ++i) {
    table.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void KvBlockPool::give_back(std::vector<int32_t>& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) free_.push_back(*it);
  table.clear();
}

}  // namespace crucible::serve
