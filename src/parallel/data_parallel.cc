#include "parallel/data_parallel.h"

#include <cmath>
#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/clock.h"
#include "kernels/kernels.h"

namespace crucible::parallel {

namespace {
constexpr size_t kAlign = 16;  // floats: 64-byte aligned pieces
}

DataParallel::DataParallel(comm::Comm& comm, nn::ParamRegistry& params, const DataParallelConfig& cfg)
    : comm_(comm), params_(params), cfg_(cfg) {
  const size_t target = std::max<size_t>(kAlign, size_t(cfg.bucket_mb * 1e6 / sizeof(float)));
  const auto& specs = params.specs();
  // Buckets end at parameter boundaries, built from the end of the buffer.
  size_t end = params.numel();
  for (size_t i = specs.size(); i-- > 0;) {
    size_t begin = i == 0 ? 0 : specs[i].offset;
    if (end - begin >= target || i == 0) {
      Bucket b;
      b.begin = begin;
      b.end = end;
      buckets_.push_back(std::move(b));
      end = begin;
    }
  }
  const int W = comm.size();
  size_t scatter_total = 0;
  for (Bucket& b : buckets_) {
    size_t len = b.end - b.begin;
    size_t piece = (len + size_t(W) - 1) / size_t(W);
    piece = (piece + kAlign - 1) / kAlign * kAlign;
    for (int r = 0; r < W; ++r) {
      size_t lo = std::min(len, size_t(r) * piece), hi = std::min(len, lo + piece);
      b.offsets.push_back(b.begin + lo);
      b.counts.push_back(hi - lo);
    }
    scatter_off_.push_back(scatter_total);
    scatter_total += b.counts[size_t(comm.rank())];
  }
  if (cfg.zero == 2 && cfg.grad_dtype == DType::f32)
    scatter_ = Tensor::zeros(Shape{int64_t(std::max<size_t>(1, scatter_total))}, DType::f32,
                             "dist.scatter", params.device());  // beside the gradients
  if (cfg.grad_dtype == DType::bf16) {
    wire_ = Tensor::zeros(Shape{int64_t(params.numel())}, DType::bf16, "dist.grad_wire", params.device());
    size_t at = 0;
    for (Bucket& b : buckets_) {
      b.recv_at = at;
      at += size_t(W) * b.counts[size_t(comm.rank())];
    }
    recv_ = Tensor::zeros(Shape{int64_t(std::max<size_t>(1, at))}, DType::bf16, "dist.grad_recv", params.device());
  }
}

std::vector<optim::Range> DataParallel::optimizer_shard() const {
  if (cfg_.zero == 0) return {};
  std::vector<optim::Range> shard;
  const size_t r = size_t(comm_.rank());
  for (const Bucket& b : buckets_)
    if (b.counts[r] > 0) shard.push_back({b.offsets[r], b.offsets[r] + b.counts[r]});
  std::sort(shard.begin(), shard.end(),
            [](const optim::Range& x, const optim::Range& y) { return x.begin < y.begin; });
  if (shard.empty()) shard.push_back({0, 0});  // a rank with nothing to update
  return shard;
}

optim::AllSum DataParallel::norm_all_sum() {
  if (cfg_.zero == 0) return nullptr;
  return [this](double local) {
    double v = local;
    Status s = comm_.allreduce(&v, 1, comm::ReduceOp::kSum);
    if (!s.is_ok()) {  // the optimizer cannot take a Status; the loop collects it
      if (error_.is_ok()) error_ = s;
      return std::nan("");
    }
    return v;
  };
}

void DataParallel::begin_reduction() {
  for (Bucket& b : buckets_) b.started = false;
  held_ns_ = 0;
}

void DataParallel::start(Bucket& b) {
  float* g = params_.grads();
  const double n = comm_.size(), bytes = double(b.end - b.begin) * dtype_size(cfg_.grad_dtype);
  traffic_bytes_ += (cfg_.zero == 2 ? 1 : 2) * (n - 1) / n * bytes;
  if (cfg_.grad_dtype == DType::bf16) {
    bf16* w = wire_.bf16_data();
    kernels::convert_to_bf16(w + b.begin, g + b.begin, b.end - b.begin);
    b.request = comm_.ialltoall_pieces(w + b.begin, recv_.bf16_data() + b.recv_at, b.counts);
    b.phase = 1;
  } else if (cfg_.zero == 2) {
    size_t i = size_t(&b - buckets_.data());
    b.request = comm_.ireduce_scatter(g + b.begin, scatter_.f32() + scatter_off_[i], b.counts);
  } else {
    b.request = comm_.iallreduce(g + b.begin, b.end - b.begin, comm::ReduceOp::kSum);
  }
  b.started = true;
}

void DataParallel::on_grads_ready(size_t ready_from) {
  const int64_t t0 = now_ns();
  for (Bucket& b : buckets_) {
    if (b.started) {
      if (!b.request.done()) b.request.test();  // drives MPI progress
      if (b.phase == 1 && b.request.done() && b.request.wait().is_ok()) reduce_pieces(b);
    } else if (b.begin >= ready_from) {
      start(b);
    }
  }
  held_ns_ += now_ns() - t0;
}

void DataParallel::reduce_pieces(Bucket& b) {
  const size_t r = size_t(comm_.rank()), count = b.counts[r];
  // recv_ holds (W, count): every rank's copy of this piece. zero 2 keeps
  // its sums unrounded (only this rank reads its pieces); otherwise the sum
  // is rounded once into the wire, and this rank keeps what every other rank
  // receives.
  kernels::sum_bf16_pieces(params_.grads() + b.offsets[r], cfg_.zero == 2 ? nullptr : wire_.bf16_data() + b.offsets[r],
                           recv_.bf16_data() + b.recv_at, comm_.size(), count);
  if (cfg_.zero == 2) {
    b.phase = 3;
    return;
  }
  b.request = comm_.iallgather_pieces(wire_.bf16_data() + b.begin, b.counts);
  b.phase = 2;
}

Status DataParallel::wait(Bucket& b) {
  CRUCIBLE_RETURN_IF_ERROR(b.request.wait());
  if (b.phase == 1) {
    reduce_pieces(b);
    CRUCIBLE_RETURN_IF_ERROR(b.request.wait());
  }
  if (b.phase == 2) {  // the other ranks' rounded sums, widened into the f32 buffer
    const size_t r = size_t(comm_.rank());
    for (size_t q = 0; q < b.counts.size(); ++q)
      if (q != r) kernels::convert_to_f32(params_.grads() + b.offsets[q], wire_.bf16_data() + b.offsets[q], b.counts[q]);
  }
  b.phase = 0;
  return Status::ok();
}

Result<double> DataParallel::finish_reduction() {
  Stopwatch sw;
  for (Bucket& b : buckets_)
    if (!b.started) start(b);
  for (Bucket& b : buckets_) CRUCIBLE_RETURN_IF_ERROR(wait(b));
  double waited = sw.elapsed_s() + held_ns_ * 1e-9;
  held_ns_ = 0;
  if (cfg_.zero == 2 && cfg_.grad_dtype == DType::f32) {
    const size_t r = size_t(comm_.rank());
    for (size_t i = 0; i < buckets_.size(); ++i) {
      const Bucket& b = buckets_[i];
      kernels::copy_bytes(params_.grads() + b.offsets[r], scatter_.f32() + scatter_off_[i],
                          b.counts[r] * sizeof(float));
    }
  }
  return waited;
}

Result<double> DataParallel::gather_parameters() {
  if (cfg_.zero == 0) return 0.0;
  Stopwatch sw;
  const size_t r = size_t(comm_.rank());
  float* p = params_.values();
  const double n = comm_.size();
  for (Bucket& b : buckets_) {
    traffic_bytes_ += (n - 1) / n * double(b.end - b.begin) * sizeof(float);
    b.request = comm_.iallgather(p + b.offsets[r], p + b.begin, b.counts);
  }
  for (Bucket& b : buckets_) CRUCIBLE_RETURN_IF_ERROR(b.request.wait());
  // bf16 models: the other ranks' pieces arrived in f32; their working copy
  // is refreshed here (this rank's own pieces the optimizer pass refreshed).
  if (params_.values_bf16())
    for (const Bucket& b : buckets_)
      for (size_t q = 0; q < b.counts.size(); ++q)
        if (q != r) params_.refresh_bf16(b.offsets[q], b.offsets[q] + b.counts[q]);
  return sw.elapsed_s();
}

}  // namespace crucible::parallel
