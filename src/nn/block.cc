#include "nn/layers.h"

namespace crucible::nn {

// Sequence parallel (shards = tp): the residual stream and the LayerNorms
// hold B*T/shards rows; attention and the MLP gather what they need.
void Block::forward(Arena& arena, const float* r_a, const float* r_b, float** out_a,
                    float** out_b, int B, int T) {
  const size_t NC = size_t(B * T / shards) * C;
  in_a = r_a;
  in_b = r_b;
  r_mid = arena.allocate_array<float>(NC);
  mlp_out = arena.allocate_array<float>(NC);
  Arena::Mark m = arena.mark();
  run_forward(arena, r_a, r_b, B, T);
  if (recompute) arena.rewind(m);  // backward runs it again
  *out_a = r_mid;
  *out_b = mlp_out;
}

void Block::run_forward(Arena& arena, const float* r_a, const float* r_b, int B, int T) {
  const int rows = B * T / shards;
  const size_t NC = size_t(rows) * C;
  float* r = r_b ? arena.allocate_array<float>(NC) : nullptr;  // r_a + r_b, saved by ln_1
  void* h = arena_act(arena, NC, act_type);                   // ln_1 out (saved by c_attn)
  float* attn_out = arena.allocate_array<float>(NC);
  void* h2 = arena_act(arena, NC, act_type);  // ln_2 out (saved by c_fc)
  ln_1.forward(arena, h, r, r_a, r_b, rows);
  attn.forward(arena, attn_out, h, B, T);
  ln_2.forward(arena, h2, r_mid, ln_1.x, attn_out, rows);
  mlp.forward(arena, mlp_out, h2, B * T);
}

// dr: d r_next on entry (= d mlp_out = d r_mid's direct path), d r on exit.
void Block::backward(Arena& arena, float* dr, int B, int T, BackwardPass pass) {
  if (pass == BackwardPass::kWeight) {
    mlp.backward(arena, nullptr, nullptr, B * T, pass);
    attn.backward(arena, nullptr, nullptr, B, T, pass);
    return;
  }
  const int rows = B * T / shards;
  Arena::Mark m = arena.mark();
  // Full recomputation: the forward again, into the same outputs (the same
  // bits), its saved tensors in this backward's scratch.
  if (recompute) run_forward(arena, in_a, in_b, B, T);
  float* dh = arena.allocate_array<float>(size_t(rows) * C);
  mlp.backward(arena, dh, dr, B * T, pass);
  ln_2.backward(dr, dh, rows);  // dr += : now d r_mid
  attn.backward(arena, dh, dr, B, T, pass);
  ln_1.backward(dr, dh, rows);  // dr += : now d r
  if (pass == BackwardPass::kAll) arena.rewind(m);  // kInput: the layers kept theirs after dh
}

}  // namespace crucible::nn
