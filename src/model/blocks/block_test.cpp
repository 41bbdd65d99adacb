// Scratch: pieces start 256-byte aligned whatever the sizes before them, and a block that takes more than the bytes
// its declared need reserves fails loudly instead of running past the workspace.
#include "model/blocks/block.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "base/error.h"

namespace rs::model {
namespace {

TEST(Scratch, PiecesAreAlignedAndBoundedByTheNeed) {
  const ScratchNeed need{.floats = 3 + 5, .buffers = 2};  // [T, 3] f32 then [T, 5] i32
  const int64_t tokens = 7;
  Buffer memory = Buffer::host(Scratch::bytes_for(need, tokens) + Scratch::kAlign);
  // An aligned base, as the model's workspace gives.
  const auto base =
      (reinterpret_cast<uintptr_t>(memory.data()) + Scratch::kAlign - 1) / Scratch::kAlign * Scratch::kAlign;
  Scratch scratch(reinterpret_cast<void*>(base), Scratch::bytes_for(need, tokens), Device{});
  const Tensor a = scratch.take(DType::kF32, {tokens, 3});
  const Tensor b = scratch.take(DType::kI32, {tokens, 5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % Scratch::kAlign, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % Scratch::kAlign, 0u);
  EXPECT_GE(static_cast<const char*>(b.data()), static_cast<const char*>(a.data()) + a.bytes());
  // What is left is the alignment slack (less than 256 bytes per declared piece): more than that throws.
  EXPECT_THROW(scratch.take(DType::kF32, {tokens, 64}), Error);
  scratch.reset();  // the next block starts from the beginning again
  EXPECT_EQ(scratch.take(DType::kF32, {tokens, 3}).data(), a.data());
}

}  // namespace
}  // namespace rs::model
