// Exports this ISA's kernels as a KernelTable (one per compiled ISA).
#include "kernels/isa/isa.h"

namespace crucible::kernels::CRUCIBLE_ISA {

const KernelTable table = {
    .isa = CRUCIBLE_ISA_NAME,
    .embedding_forward = embedding_forward,
    .embedding_backward = embedding_backward,
    .embedding_lookup = embedding_lookup,
    .add_positions = add_positions,
    .residual_layernorm_forward = residual_layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .bias_gelu_forward = bias_gelu_forward,
    .bias_gelu_backward = bias_gelu_backward,
    .attention_forward = attention_forward,
    .attention_backward = attention_backward,
    .attention_paged = attention_paged,
    .softmax_cross_entropy = softmax_cross_entropy,
    .logsumexp_rows = logsumexp_rows,
    .softmax_xent_backward = softmax_xent_backward,
    .adamw_scalars = ref::adamw_scalars,
    .adamw = adamw,
    .adamw_bf16_moments = adamw_bf16_moments,
    .add_sum_squares = add_sum_squares,
    .add = add,
    .fill = fill,
    .copy_bytes = copy_bytes,
    .add_mean = add_mean,
    .target_logits = target_logits,
    .target_logits_bf16 = target_logits_bf16,
    .combine_vocab_stats = combine_vocab_stats,
    .residual_layernorm_forward_bf16 = residual_layernorm_forward_bf16,
    .bias_gelu_forward_bf16 = bias_gelu_forward_bf16,
    .bias_gelu_backward_bf16 = bias_gelu_backward_bf16,
#if defined(__AVX512BF16__)  // vdpbf16ps: the products in pairs at twice the f32 rate
    .attention_forward_bf16 = attention_forward_bf16_pairs,
    .attention_backward_bf16 = attention_backward_bf16_pairs,
#else  // widened to f32 products: emulated pairs would only round more
    .attention_forward_bf16 = attention_forward_bf16,
    .attention_backward_bf16 = attention_backward_bf16,
#endif
    .attention_forward_bf16_pairs = attention_forward_bf16_pairs,
    .attention_backward_bf16_pairs = attention_backward_bf16_pairs,
    .softmax_cross_entropy_bf16 = softmax_cross_entropy_bf16,
    .logsumexp_rows_bf16 = logsumexp_rows_bf16,
    .softmax_xent_backward_bf16 = softmax_xent_backward_bf16,
    .convert_to_bf16 = convert_to_bf16,
    .convert_to_f32 = convert_to_f32,
    .sum_bf16_pieces = sum_bf16_pieces,
};

}  // namespace crucible::kernels::CRUCIBLE_ISA
