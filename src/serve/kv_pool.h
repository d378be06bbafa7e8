// KvBlockPool: the KV cache of `crucible serve`, a pool of fixed-size blocks
// allocated once at start-up. A block holds block_tokens positions of every
// layer's keys and values, (L, 2, block_tokens, C) f32, the layout
// nn::Decoder reads (nn/decoder.h). A request takes the blocks its prompt and
// max_tokens can fill when it is admitted and gives them back when it ends,
// so long and short requests share one region without fragmentation, a
// running request never waits for memory, and nothing is allocated per token.
// Not thread-safe: the engine's thread owns it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "nn/decoder.h"

namespace crucible::serve {

class KvBlockPool {
 public:
  // n_blocks blocks of block_floats floats each (Decoder::block_floats).
  KvBlockPool(int n_blocks, int block_tokens, size_t block_floats);

  nn::KvView view() { return {storage_.f32(), block_tokens_}; }
  int block_tokens() const { return block_tokens_; }
  int blocks_total() const { return int(free_.capacity()); }
  int blocks_free() const { return int(free_.size()); }
  size_t bytes() const { return storage_.nbytes(); }
  // Blocks that hold `positions` positions.
  int blocks_for(int positions) const { return (positions + block_tokens_ - 1) / block_tokens_; }

  // Appends n block ids to `table`; false (and nothing taken) when fewer
  // than n are free.
  bool take(int n, std::vector<int32_t>& table);
  // Returns every block of `table` and clears it.
  void give_back(std::vector<int32_t>& table);

 private:
  Tensor storage_;
  int block_tokens_;
  std::vector<int32_t> free_;  // a stack of free block ids, reserved for all of them
};

}  // namespace crucible::serve
