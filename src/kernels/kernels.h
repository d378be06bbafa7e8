// crucible's fused CPU kernels: pure functions on raw row-major buffers.
//
// Each kernel below exists four times, compiled from one source per ISA
// (src/kernels/isa/*.cc built as generic x86-64, AVX2+FMA, AVX-512 and
// AVX-512 with AVX512_BF16), and
// the widest one the CPU supports is chosen at run time (dispatch.cc). Each
// also has a naive reference in kernels/reference.h: the test oracle.
//
// Conventions: shapes in comments use B (batch), T (time), C (channels),
// NH (heads), hs = C/NH, V (vocabulary), N (rows). Gradient outputs documented
// as "+=" accumulate into what is there (so gradient accumulation over
// micro-batches needs no extra pass); "=" overwrites. All kernels parallelise
// with OpenMP and honour set_num_threads().
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/kernel_stats.h"
#include "kernels/cost.h"
#include "kernels/device_scope.h"
#include "kernels/kernel_timer.h"
#include "kernels/reference.h"

namespace crucible::kernels {

// One entry per kernel of signatures.inc (contracts documented there).
struct KernelTable {
  const char* isa;
  decltype(&ref::embedding_forward) embedding_forward;
  decltype(&ref::embedding_backward) embedding_backward;
  decltype(&ref::embedding_lookup) embedding_lookup;
  decltype(&ref::add_positions) add_positions;
  decltype(&ref::residual_layernorm_forward) residual_layernorm_forward;
  decltype(&ref::layernorm_backward) layernorm_backward;
  decltype(&ref::bias_gelu_forward) bias_gelu_forward;
  decltype(&ref::bias_gelu_backward) bias_gelu_backward;
  decltype(&ref::attention_forward) attention_forward;
  decltype(&ref::attention_backward) attention_backward;
  decltype(&ref::attention_paged) attention_paged;
  decltype(&ref::softmax_cross_entropy) softmax_cross_entropy;
  decltype(&ref::logsumexp_rows) logsumexp_rows;
  decltype(&ref::softmax_xent_backward) softmax_xent_backward;
  decltype(&ref::adamw_scalars) adamw_scalars;
  decltype(&ref::adamw) adamw;
  decltype(&ref::adamw_bf16_moments) adamw_bf16_moments;
  decltype(&ref::add_sum_squares) add_sum_squares;
  decltype(&ref::add) add;
  decltype(&ref::fill) fill;
  decltype(&ref::copy_bytes) copy_bytes;
  decltype(&ref::add_mean) add_mean;
  decltype(&ref::target_logits) target_logits;
  decltype(&ref::target_logits_bf16) target_logits_bf16;
  decltype(&ref::combine_vocab_stats) combine_vocab_stats;
  decltype(&ref::residual_layernorm_forward_bf16) residual_layernorm_forward_bf16;
  decltype(&ref::bias_gelu_forward_bf16) bias_gelu_forward_bf16;
  decltype(&ref::bias_gelu_backward_bf16) bias_gelu_backward_bf16;
  decltype(&ref::attention_forward_bf16) attention_forward_bf16;
  decltype(&ref::attention_backward_bf16) attention_backward_bf16;
  // The same with every product in bf16 pairs, vdpbf16ps's shape: what the
  // avx512bf16 table's two above are; exported by every table so that tests
  // run it on every CPU (its arithmetic emulated in two FMAs where the
  // instruction is missing). Not for models: use the entries above.
  decltype(&ref::attention_forward_bf16) attention_forward_bf16_pairs;
  decltype(&ref::attention_backward_bf16) attention_backward_bf16_pairs;
  decltype(&ref::softmax_cross_entropy_bf16) softmax_cross_entropy_bf16;
  decltype(&ref::logsumexp_rows_bf16) logsumexp_rows_bf16;
  decltype(&ref::softmax_xent_backward_bf16) softmax_xent_backward_bf16;
  decltype(&ref::convert_to_bf16) convert_to_bf16;
  decltype(&ref::convert_to_f32) convert_to_f32;
  decltype(&ref::sum_bf16_pieces) sum_bf16_pieces;
};

// The table in use (the widest supported ISA unless overridden).
const KernelTable& active();
// Every table this CPU can run, narrowest first (for tests and benchmarks).
std::vector<const KernelTable*> supported_tables();
// All compiled tables, whether or not the CPU can run them.
std::vector<const KernelTable*> compiled_tables();
// Force an ISA by name ("generic", "avx2", "avx512", "avx512bf16"); false if
// unsupported. avx512bf16 is avx512 with AVX512_BF16's conversions (and
// dot products where a kernel uses them); elsewhere the bf16 variants widen.
bool select_isa(const std::string& name);

// Call-site wrappers so code reads kernels::attention_forward(...); each call
// is timed into its kernel class (kernels/kernel_timer.h: the host clock on
// the CPU, CUDA events on a GPU) with its FLOPs and bytes from the cost
// models (kernels/cost.h).
// They dispatch on the calling thread's device (kernels/device_scope.h).
#define CRUCIBLE_FORWARD(fn, cls)                                        \
  template <typename... A>                                               \
  inline auto fn(A&&... a) {                                             \
    const auto k_ = table_here().fn;                                     \
    if (!k_) no_kernel_here(#fn);                                        \
    const cost::Cost c_ = cost::fn(a...);                                \
    KernelTimer timer_(KernelClass::cls, c_.flops, c_.bytes);            \
    return k_(static_cast<A&&>(a)...);                                   \
  }
CRUCIBLE_FORWARD(embedding_forward, embedding)
CRUCIBLE_FORWARD(embedding_backward, embedding)
CRUCIBLE_FORWARD(embedding_lookup, embedding)
CRUCIBLE_FORWARD(add_positions, embedding)
CRUCIBLE_FORWARD(residual_layernorm_forward, layernorm)
CRUCIBLE_FORWARD(layernorm_backward, layernorm)
CRUCIBLE_FORWARD(bias_gelu_forward, gelu)
CRUCIBLE_FORWARD(bias_gelu_backward, gelu)
CRUCIBLE_FORWARD(attention_forward, attention)
CRUCIBLE_FORWARD(attention_backward, attention)
CRUCIBLE_FORWARD(attention_paged, attention)
CRUCIBLE_FORWARD(softmax_cross_entropy, cross_entropy)
CRUCIBLE_FORWARD(logsumexp_rows, cross_entropy)
CRUCIBLE_FORWARD(softmax_xent_backward, cross_entropy)
CRUCIBLE_FORWARD(adamw_scalars, optimizer)
CRUCIBLE_FORWARD(adamw, optimizer)
CRUCIBLE_FORWARD(adamw_bf16_moments, optimizer)
CRUCIBLE_FORWARD(add_sum_squares, optimizer)
CRUCIBLE_FORWARD(add, other)
CRUCIBLE_FORWARD(fill, other)
CRUCIBLE_FORWARD(copy_bytes, other)
CRUCIBLE_FORWARD(add_mean, other)
CRUCIBLE_FORWARD(target_logits, cross_entropy)
CRUCIBLE_FORWARD(target_logits_bf16, cross_entropy)
CRUCIBLE_FORWARD(combine_vocab_stats, cross_entropy)
CRUCIBLE_FORWARD(residual_layernorm_forward_bf16, layernorm)
CRUCIBLE_FORWARD(bias_gelu_forward_bf16, gelu)
CRUCIBLE_FORWARD(bias_gelu_backward_bf16, gelu)
CRUCIBLE_FORWARD(attention_forward_bf16, attention)
CRUCIBLE_FORWARD(attention_backward_bf16, attention)
CRUCIBLE_FORWARD(softmax_cross_entropy_bf16, cross_entropy)
CRUCIBLE_FORWARD(logsumexp_rows_bf16, cross_entropy)
CRUCIBLE_FORWARD(softmax_xent_backward_bf16, cross_entropy)
CRUCIBLE_FORWARD(convert_to_bf16, other)
CRUCIBLE_FORWARD(convert_to_f32, other)
CRUCIBLE_FORWARD(sum_bf16_pieces, other)
#undef CRUCIBLE_FORWARD

}  // namespace crucible::kernels
