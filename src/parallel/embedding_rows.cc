#include "parallel/embedding_rows.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/clock.h"
#include "kernels/kernels.h"

namespace crucible::parallel {

EmbeddingGradRows::EmbeddingGradRows(comm::Comm& dp, size_t rows, int C, Device device)
    : comm_(dp), C_(C), capacity_(rows), block_bytes_(block_bytes(rows, C)) {
  // Blocks are whole floats (4-byte tokens, then rows): held as f32 tensors.
  const int64_t words = int64_t(block_bytes_ / sizeof(float));
  mine_ = Tensor::zeros(Shape{words}, DType::f32, "dist.embedding_rows", device);
  all_ = Tensor::zeros(Shape{words * dp.size()}, DType::f32, "dist.embedding_rows_all", device);
  sink_.tokens = reinterpret_cast<int32_t*>(mine_.f32());
  sink_.rows = mine_.f32() + capacity_;
  sink_.capacity = capacity_;
}

bool EmbeddingGradRows::worth(int ranks, size_t rows, int64_t vocab, int C) {
  if (ranks < 2) return false;
  const double n = ranks;
  const double gathered =
      (n - 1) * double(rows) * (1 + C);  // each rank receives every other's block
  const double dense = 2 * (n - 1) / n * double(vocab) * C;
  return gathered < dense;
}

bool EmbeddingGradRows::applies(const Layout& layout, const nn::GPTConfig& model, int accum,
                                int B) {
  const size_t rows = size_t(accum) * size_t(B) * size_t(model.seq_len);
  return layout.pp() == 1 &&
         worth(layout.dp(), rows, nn::shard_range(model.vocab_size, layout.tp(), 0).size(),
               model.n_embd);
}

uint64_t EmbeddingGradRows::block_bytes(size_t rows, int C) {
  return rows * (sizeof(int32_t) + size_t(C) * sizeof(float));
}

Result<double> EmbeddingGradRows::add_all(float* wte_grad, nn::IndexRange vocab,
                                          double& traffic_bytes) {
  Stopwatch sw;
  CRUCIBLE_CHECK(sink_.count == capacity_, "[dist] a step's embedding rows fill their buffer");
  const size_t W = size_t(comm_.size());
  CRUCIBLE_RETURN_IF_ERROR(comm_.allgather_bytes(mine_.f32(), block_bytes_, all_.f32()));
  traffic_bytes += double(W - 1) * double(block_bytes_);
  // Rank order, then row order within a rank: the embedding's backward
  // kernel adds a block's rows in token order to each float (no atomics),
  // so every rank gets the same bits.
  const size_t words = block_bytes_ / sizeof(float);
  for (size_t q = 0; q < W; ++q) {
    const float* block = all_.f32() + q * words;
    kernels::embedding_backward(wte_grad, nullptr, block + capacity_,
                                reinterpret_cast<const int32_t*>(block), vocab.lo, vocab.hi, 1,
                                int(capacity_), C_);
  }
  sink_.count = 0;
  return sw.elapsed_s();
}

}  // namespace crucible::parallel
