// Exports this ISA's kernels as a KernelTable (one per compiled ISA).
#include "kernels/isa/isa.h"

namespace crucible::kernels::CRUCIBLE_ISA {

const KernelTable table = {
    .isa = CRUCIBLE_ISA_NAME,
    .embedding_forward = embedding_forward,
    .embedding_backward = embedding_backward,
    .residual_layernorm_forward = residual_layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .bias_gelu_forward = bias_gelu_forward,
    .bias_gelu_backward = bias_gelu_backward,
    .attention_forward = attention_forward,
    .attention_backward = attention_backward,
    .softmax_cross_entropy = softmax_cross_entropy,
    .logsumexp_rows = logsumexp_rows,
    .softmax_xent_backward = softmax_xent_backward,
    .adamw = adamw,
    .sum_squares = sum_squares,
};

}  // namespace crucible::kernels::CRUCIBLE_ISA
