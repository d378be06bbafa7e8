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
#include <string>
#include <vector>

#include "core/tensor.h"

namespace crucible::nn {

enum class Init { zeros, ones, normal };

struct ParamSpec {
  std::string name;
  Shape shape;
  size_t offset = 0;  // in elements, into the flat buffers
  size_t numel = 0;
  bool decay = false;  // AdamW weight decay applies (2-D matmul weights)
  Init init = Init::zeros;
  float init_std = 0.0f;
  // A copy of a parameter that another part of the model holds as well (the
  // tied wte on the last pipeline stage): its gradient is summed with the
  // other copy's, so norms count it once (the other copy).
  bool replica = false;
};

struct Param {
  float* value = nullptr;
  float* grad = nullptr;
};

class ParamRegistry {
 public:
  // Returns the index of the new parameter.
  size_t add(std::string name, Shape shape, bool decay, Init init, float init_std = 0.0f);
  void mark_replica(size_t index) { specs_.at(index).replica = true; }
  // Allocates the flat buffers (pool-backed, zeroed). Call once, after all add().
  void allocate();

  Param param(size_t index) const;
  const std::vector<ParamSpec>& specs() const { return specs_; }
  const ParamSpec* find(const std::string& name) const;
  size_t numel() const { return total_; }
  float* values() const { return values_.f32(); }
  float* grads() const { return grads_.f32(); }

  // Each parameter draws from its own RNG stream keyed by (seed, name), so
  // initial weights do not depend on registration order or world layout.
  void init(uint64_t seed);
  void zero_grad();

 private:
  std::vector<ParamSpec> specs_;
  size_t total_ = 0;
  Tensor values_, grads_;
};

}  // namespace crucible::nn
