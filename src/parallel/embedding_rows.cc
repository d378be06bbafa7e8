#include "parallel/embedding_rows.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/clock.h"

namespace crucible::parallel {

EmbeddingGradRows::EmbeddingGradRows(comm::Comm& dp, size_t rows, int C)
    : comm_(dp), C_(C), capacity_(rows), block_bytes_(rows * (sizeof(int32_t) + size_t(C) * sizeof(float))) {
  mine_.assign(block_bytes_, std::byte{0});  // faulted in here, not in the first step
  all_.assign(block_bytes_ * size_t(dp.size()), std::byte{0});
  sink_.tokens = reinterpret_cast<int32_t*>(mine_.data());
  sink_.rows = reinterpret_cast<float*>(mine_.data() + capacity_ * sizeof(int32_t));
  sink_.capacity = capacity_;
}

bool EmbeddingGradRows::worth(int ranks, size_t rows, int64_t vocab, int C) {
  if (ranks < 2) return false;
  const double n = ranks;
  const double gathered = (n - 1) * double(rows) * (1 + C);  // each rank receives every other's block
  const double dense = 2 * (n - 1) / n * double(vocab) * C;
  return gathered < dense;
}

bool EmbeddingGradRows::applies(const Layout& layout, const nn::GPTConfig& model, int accum, int B) {
  const size_t rows = size_t(accum) * size_t(B) * size_t(model.seq_len);
  return layout.pp() == 1 &&
         worth(layout.dp(), rows, nn::shard_range(model.vocab_size, layout.tp(), 0).size(), model.n_embd);
}

uint64_t EmbeddingGradRows::bytes(int ranks, size_t rows, int C) {
  return uint64_t(ranks + 1) * rows * (sizeof(int32_t) + size_t(C) * sizeof(float));
}

Result<double> EmbeddingGradRows::add_all(float* wte_grad, nn::IndexRange vocab, double& traffic_bytes) {
  Stopwatch sw;
  CRUCIBLE_CHECK(sink_.count == capacity_, "[dist] a step's embedding rows fill their buffer");
  const size_t W = size_t(comm_.size());
  CRUCIBLE_RETURN_IF_ERROR(comm_.allgather_bytes(mine_.data(), block_bytes_, all_.data()));
  traffic_bytes += double(W - 1) * double(block_bytes_);
  const int C = C_;
  // Threads split the channels; within a channel block the ranks and rows
  // add in one order, the same on every rank.
#pragma omp parallel for schedule(static)
  for (int c0 = 0; c0 < C; c0 += 64) {
    const int c1 = std::min(C, c0 + 64);
    for (size_t q = 0; q < W; ++q) {
      const std::byte* block = all_.data() + q * block_bytes_;
      const int32_t* tokens = reinterpret_cast<const int32_t*>(block);
      const float* rows = reinterpret_cast<const float*>(block + capacity_ * sizeof(int32_t));
      for (size_t n = 0; n < capacity_; ++n) {
        const int64_t t = tokens[n];
        if (t < vocab.lo || t >= vocab.hi) continue;
        const float* d = rows + n * size_t(C);
        float* e = wte_grad + size_t(t - vocab.lo) * size_t(C);
        for (int c = c0; c < c1; ++c) e[c] += d[c];
      }
    }
  }
  sink_.count = 0;
  return sw.elapsed_s();
}

}  // namespace crucible::parallel
