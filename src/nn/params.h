// ParamRegistry: every parameter of a model lives in one flat f32 buffer, and
// every gradient in a second one with the same layout. Layers hold Param views
// (value and grad pointers into the two buffers). Data-parallel buckets, ZeRO
// shards and checkpoint shards are slices of these buffers.
//
// Registration happens once, before allocate(); names follow Hugging Face's
// GPT-2 (transformer.h.0.attn.c_attn.weight ...) so weights exchange with the
// ecosystem as safetensors. Not thread-safe; owned by the model.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace crucible::nn {

enum class Init { zeros, ones, normal };

// Which part of the whole model's tensor a tensor-parallel shard holds:
// along dimension `dim`, the whole tensor's index ranges [lo, hi) of
// `pieces`, concatenated in order (c_attn's q, k and v columns of this
// rank's heads are three pieces). dim < 0: the whole tensor.
struct Shard {
  struct Piece {
    int64_t lo = 0, hi = 0;
  };
  int dim = -1;
  std::vector<Piece> pieces;
  bool whole() const { return dim < 0; }
};

struct ParamSpec {
  std::string name;
  Shape shape;
  size_t offset = 0;  // in elements, into the flat buffers
  size_t numel = 0;
  bool decay = false;  // AdamW weight decay applies (2-D matmul weights)
  Init init = Init::zeros;
  float init_std = 0.0f;
  // A copy of a parameter that another part of the model holds as well (the
  // tied wte on the last pipeline stage; a tensor-parallel rank's copy of
  // what every rank of its group holds whole, on ranks other than the
  // first): its gradient is summed with, or equal to, the other copy's, so
  // norms and checkpoints count it once (the other copy).
  bool replica = false;
  // The whole model's tensor this one is (part of): its shape, and which
  // part of it this is (whole: shape == whole_shape).
  Shape whole_shape;
  Shard shard;
};

// The contiguous runs of elements that make a sharded tensor from the whole
// one: fn(local, whole, count) for each, in local order, offsets in elements
// from each tensor's start (one run for a whole tensor). The one mapping
// between a shard and its whole tensor: initial values, checkpoints and
// exports all go through it.
void for_each_run(const ParamSpec& s, const std::function<void(size_t, size_t, size_t)>& fn);
// local (s.numel) := its part of whole (s.whole_shape), and the converse.
void copy_from_whole(const ParamSpec& s, const float* whole, float* local);
void copy_to_whole(const ParamSpec& s, const float* local, float* whole);

// value16: the bf16 working copy of value that bf16 GEMMs read (null in an
// f32 model); refreshed from value, never written by the model.
struct Param {
  float* value = nullptr;
  float* grad = nullptr;
  bf16* value16 = nullptr;
};

class ParamRegistry {
 public:
  // Returns the index of the new parameter. A shard gives the whole
  // tensor's shape and which part of it this one holds (its shape follows).
  size_t add(std::string name, Shape shape, bool decay, Init init, float init_std = 0.0f);
  size_t add(std::string name, Shape whole, const Shard& shard, bool decay, Init init,
             float init_std = 0.0f);
  void mark_replica(size_t index) { specs_.at(index).replica = true; }
  // Allocates the flat buffers (pool-backed, zeroed) in `device`'s memory.
  // Call once, after all add(). bf16_copy: a third flat buffer, the
  // parameters' bf16 working copy (train.precision = "bf16"; same layout, 2
  // bytes an element). On a GPU the values also get a host copy
  // (host_values), the one place host code reads and writes them.
  void allocate(bool bf16_copy = false, Device device = Device::cpu());
  Device device() const { return values_.device(); }

  Param param(size_t index) const;
  const std::vector<ParamSpec>& specs() const { return specs_; }
  const ParamSpec* find(const std::string& name) const;
  size_t numel() const { return total_; }
  float* values() const { return values_.f32(); }
  float* grads() const { return grads_.f32(); }
  // The bf16 working copy (null without one). Whoever writes values()
  // outside the optimizer's pass (which refreshes it as it goes: the kernel's
  // p_bf16) refreshes it: loading weights, gathering ZeRO shards.
  bf16* values_bf16() const;
  void refresh_bf16(size_t begin = 0, size_t end = SIZE_MAX);

  // Host code's view of the values (initialisation, checkpoints, loads,
  // export): values() itself on the CPU; on a GPU the host copy, current
  // after download() and sent to the device (with the bf16 copy refreshed)
  // by upload(). Copies at step edges only.
  float* host_values() const;
  void upload();
  void download() const;

  // Each parameter draws from its own RNG stream keyed by (seed, name), so
  // initial weights do not depend on registration order or world layout; a
  // shard draws its elements' positions of the whole tensor's stream (the
  // stream is counter-based), so it holds the unsharded run's numbers.
  void init(uint64_t seed);
  void zero_grad();

 private:
  std::vector<ParamSpec> specs_;
  size_t total_ = 0;
  Tensor values_, grads_, values_bf16_;
  mutable Tensor host_;  // a GPU's values' host copy (undefined on the CPU): a cache of the values
};

}  // namespace crucible::nn
