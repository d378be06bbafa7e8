// Exports this ISA's kernels as a KernelTable (one per compiled ISA).
#include "kernels/isa/isa.h"

namespace crucible::kernels::CRUCIBLE_ISA {

const KernelTable table = {
    .isa = CRUCIBLE_ISA_NAME,
    .embedding_forward = ref::embedding_forward,
    .embedding_backward = ref::embedding_backward,
    .residual_layernorm_forward = ref::residual_layernorm_forward,
    .layernorm_backward = ref::layernorm_backward,
    .bias_gelu_forward = ref::bias_gelu_forward,
    .bias_gelu_backward = ref::bias_gelu_backward,
    .attention_forward = ref::attention_forward,
    .attention_backward = ref::attention_backward,
    .softmax_cross_entropy = ref::softmax_cross_entropy,
    .adamw = ref::adamw,
    .sum_squares = ref::sum_squares,
};

}  // namespace crucible::kernels::CRUCIBLE_ISA
