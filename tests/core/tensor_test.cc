#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

namespace crucible {
namespace {

TEST(Shape, NumelEqualityAndString) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.ndim, 3);
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.str(), "(2,3,4)");
  EXPECT_EQ(s, (Shape{2, 3, 4}));
  EXPECT_FALSE(s == (Shape{2, 3}));
  EXPECT_FALSE(s == (Shape{2, 4, 3}));
  EXPECT_EQ(Shape{}.numel(), 1);  // a scalar
  EXPECT_EQ(Shape{}.str(), "()");
}

TEST(Tensor, EmptyIsContiguousWithRowMajorStrides) {
  Tensor t = Tensor::empty({2, 3, 4}, DType::f32, "tensor_test");
  ASSERT_TRUE(t.defined());
  EXPECT_EQ(t.ndim(), 3);
  EXPECT_EQ(t.dim(0), 2);
  EXPECT_EQ(t.dim(2), 4);
  EXPECT_EQ(t.stride(0), 12);
  EXPECT_EQ(t.stride(1), 4);
  EXPECT_EQ(t.stride(2), 1);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);

  Tensor h = Tensor::zeros({5, 3}, DType::bf16, "tensor_test");
  EXPECT_EQ(h.dtype(), DType::bf16);
  EXPECT_EQ(h.nbytes(), 30u);
  for (int64_t i = 0; i < h.numel(); ++i) EXPECT_EQ(h.bf16_data()[i].bits, 0);
  EXPECT_FALSE(Tensor().defined());
}

TEST(Tensor, ZerosIsZeroEvenOnAReusedBlock) {
  {
    Tensor dirty = Tensor::empty({64}, DType::f32, "tensor_test");
    for (int i = 0; i < 64; ++i) dirty.f32()[i] = 1.0f;
  }
  Tensor z = Tensor::zeros({64}, DType::f32, "tensor_test");
  for (int i = 0; i < 64; ++i) ASSERT_EQ(z.f32()[i], 0.0f);
}

// Every tensor knows its device: the host's by default, an arena's from its
// allocator's memory, a borrowed one's as told; views keep it. A tensor on a
// GPU whose memory no backend registered is a bug, refused by name.
TEST(Tensor, KnowsItsDevice) {
  Tensor t = Tensor::zeros({4, 3}, DType::f32, "tensor_test");
  EXPECT_EQ(t.device(), Device::cpu());
  EXPECT_EQ(t.slice(0, 1, 2).device(), Device::cpu());
  Arena arena("tensor_test arena");
  EXPECT_EQ(Tensor::arena(arena, {8}, DType::bf16).device(), Device::cpu());
  EXPECT_EQ(Tensor::borrow(t.data(), {12}, DType::f32, Device::cuda(1)).transpose(0, 0).device(), Device::cuda(1));
  if (memory_of(Device::cuda(7)) == nullptr) {
    EXPECT_DEATH(Tensor::empty({4}, DType::f32, "tensor_test", Device::cuda(7)), "no backend registered");
  }
}

TEST(Tensor, SliceIsAViewAtTheRightOffset) {
  Tensor t = Tensor::empty({4, 3, 5}, DType::f32, "tensor_test");
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = float(i);

  Tensor rows = t.slice(0, 1, 2);  // a slice of the outermost dim stays contiguous
  EXPECT_EQ(rows.shape(), (Shape{2, 3, 5}));
  EXPECT_TRUE(rows.is_contiguous());
  EXPECT_EQ(rows.f32(), t.f32() + 15);

  Tensor mid = t.slice(1, 1, 2);  // an inner slice is strided
  EXPECT_EQ(mid.shape(), (Shape{4, 2, 5}));
  EXPECT_EQ(mid.stride(0), 15);
  EXPECT_EQ(mid.stride(1), 5);
  EXPECT_EQ(mid.stride(2), 1);
  EXPECT_FALSE(mid.is_contiguous());
  EXPECT_EQ(mid.f32()[0], 5.0f);
  // element (i,j,k) of the view is element (i,j+1,k) of the base
  EXPECT_EQ(mid.f32()[2 * mid.stride(0) + 1 * mid.stride(1) + 3], 2 * 15 + 2 * 5 + 3);

  mid.f32()[0] = -1.0f;  // writes through to the base
  EXPECT_EQ(t.f32()[5], -1.0f);

  Tensor one = t.slice(0, 3, 1);  // size-1 dims do not break contiguity
  EXPECT_TRUE(one.is_contiguous());
  Tensor none = t.slice(2, 5, 0);
  EXPECT_EQ(none.numel(), 0);

  Tensor h = Tensor::empty({4, 6}, DType::bf16, "tensor_test");
  EXPECT_EQ(static_cast<char*>(h.slice(1, 3, 2).data()) - static_cast<char*>(h.data()), 6);
}

TEST(Tensor, TransposeSwapsShapeAndStridesAndSharesData) {
  Tensor t = Tensor::empty({2, 3}, DType::f32, "tensor_test");
  for (int i = 0; i < 6; ++i) t.f32()[i] = float(i);
  Tensor tt = t.transpose(0, 1);
  EXPECT_EQ(tt.shape(), (Shape{3, 2}));
  EXPECT_EQ(tt.stride(0), 1);
  EXPECT_EQ(tt.stride(1), 3);
  EXPECT_EQ(tt.data(), t.data());
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.f32()[2 * tt.stride(0) + 1 * tt.stride(1)], t.f32()[1 * 3 + 2]);
  Tensor back = tt.transpose(1, 0);
  EXPECT_TRUE(back.is_contiguous());
  EXPECT_EQ(back.shape(), t.shape());
}

TEST(Tensor, ReshapeSharesDataAndRecomputesStrides) {
  Tensor t = Tensor::empty({2, 3, 4}, DType::f32, "tensor_test");
  Tensor r = t.reshape({6, 4});
  EXPECT_EQ(r.data(), t.data());
  EXPECT_EQ(r.stride(0), 4);
  EXPECT_EQ(r.stride(1), 1);
  r.f32()[23] = 7.0f;
  EXPECT_EQ(t.f32()[23], 7.0f);
  Tensor flat = t.slice(0, 1, 1).reshape({12});
  EXPECT_EQ(flat.f32(), t.f32() + 12);
}

TEST(TensorDeathTest, InvalidViewsAreInvariantFailures) {
  Tensor t = Tensor::empty({2, 3}, DType::f32, "tensor_test");
  EXPECT_DEATH((void)t.transpose(0, 1).reshape({6}), "non-contiguous");
  EXPECT_DEATH((void)t.reshape({7}), "element count");
  EXPECT_DEATH((void)t.slice(1, 2, 2), "out of bounds");
  EXPECT_DEATH((void)t.slice(2, 0, 1), "out of range");
  EXPECT_DEATH((void)t.bf16_data(), "non-bf16");
}

TEST(Tensor, StorageReturnsToThePoolWhenTheLastOwnerDies) {
  Allocator& a = Allocator::global();
  const size_t bytes = 1000 * sizeof(float);
  const size_t cls = Allocator::size_class(bytes);
  AllocatorStats before = a.stats();
  void* data = nullptr;
  Tensor view;
  {
    Tensor t = Tensor::empty({1000}, DType::f32, "tensor_storage_test");
    data = t.data();
    EXPECT_EQ(a.stats().in_use, before.in_use + cls);
    view = t.slice(0, 10, 20).reshape({4, 5});
  }
  // The view keeps the block alive.
  EXPECT_EQ(a.stats().in_use, before.in_use + cls);
  bool found = false;
  for (auto& [tag, n] : a.live_by_tag()) found |= tag == "tensor_storage_test";
  EXPECT_TRUE(found);

  Tensor copy = view;
  view = Tensor();
  EXPECT_EQ(a.stats().in_use, before.in_use + cls);
  copy = Tensor();
  EXPECT_EQ(a.stats().in_use, before.in_use);
  for (auto& [tag, n] : a.live_by_tag()) EXPECT_NE(tag, "tensor_storage_test");

  // The next tensor of the same class reuses the block without asking the OS.
  uint64_t os_allocs = a.stats().os_allocs;
  Tensor again = Tensor::empty({990}, DType::f32, "tensor_storage_test");
  EXPECT_EQ(again.data(), data);
  EXPECT_EQ(a.stats().os_allocs, os_allocs);
}

TEST(Tensor, MovedFromTensorDoesNotDoubleRelease) {
  Allocator& a = Allocator::global();
  size_t in_use = a.stats().in_use;
  {
    Tensor t = Tensor::empty({256}, DType::f32, "tensor_test");
    Tensor u = std::move(t);
    EXPECT_TRUE(u.defined());
  }
  EXPECT_EQ(a.stats().in_use, in_use);
}

TEST(Tensor, ArenaAndBorrowedTensorsOwnNothing) {
  Allocator& a = Allocator::global();
  Arena arena("tensor_arena_test");
  Tensor x = Tensor::arena(arena, {8, 16}, DType::f32);
  EXPECT_TRUE(x.is_contiguous());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(x.data()) % 64, 0u);
  size_t in_use = a.stats().in_use;
  uint64_t allocs = a.stats().allocs;
  {
    Tensor y = Tensor::arena(arena, {8, 16}, DType::bf16);
    EXPECT_NE(y.data(), x.data());
  }
  EXPECT_EQ(a.stats().in_use, in_use);
  EXPECT_EQ(a.stats().allocs, allocs);

  float buf[12] = {};
  {
    Tensor b = Tensor::borrow(buf, {3, 4}, DType::f32);
    EXPECT_EQ(b.f32(), buf);
    EXPECT_EQ(b.stride(0), 4);
    Tensor bt = b.transpose(0, 1);
    bt.f32()[0 * bt.stride(0) + 1 * bt.stride(1)] = 3.0f;  // element (0,1) of b^T is buf[4]
  }
  EXPECT_EQ(buf[4], 3.0f);
  EXPECT_EQ(a.stats().in_use, in_use);
}

}  // namespace
}  // namespace crucible
