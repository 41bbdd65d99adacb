#include "model/blocks/block.h"

namespace rs::model {

Tensor Scratch::take(DType dtype, std::initializer_list<int64_t> shape) {
  Tensor t(base_ + used_, dtype, shape, device_);
  const size_t end = used_ + t.bytes();
  RS_CHECK(end <= bytes_, "step scratch of {} bytes cannot hold {} more (a block's scratch_need is too small)", bytes_,
           t.shape_string());
  used_ = (end + kAlign - 1) / kAlign * kAlign;
  return t;
}

}  // namespace rs::model
