#include "tensor/tensor.h"

#include <fmt/format.h>

namespace rs {

std::string device_name(Device device) {
  switch (device.kind) {
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kCuda: return fmt::format("cuda:{}", device.index);
    case DeviceKind::kMetal: return fmt::format("metal:{}", device.index);
  }
  return "?";
}

Tensor::Tensor(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device)
    : Tensor(data, dtype, shape.begin(), static_cast<int>(shape.size()), device) {}

Tensor::Tensor(void* data, DType dtype, const int64_t* shape, int ndim, Device device)
    : data_(data), dtype_(dtype), device_(device), ndim_(ndim) {
  RS_CHECK(ndim >= 0 && ndim <= kMaxDims, "tensor rank {} exceeds {}", ndim, kMaxDims);
  for (int i = 0; i < ndim; ++i) {
    RS_CHECK(shape[i] >= 0, "negative tensor dimension {}", shape[i]);
    shape_[i] = shape[i];
  }
}

int64_t Tensor::dim(int axis) const {
  if (axis < 0) axis += ndim_;
  RS_CHECK(axis >= 0 && axis < ndim_, "axis {} out of range for shape {}", axis, shape_string());
  return shape_[axis];
}

int64_t Tensor::numel() const {
  int64_t count = 1;
  for (int i = 0; i < ndim_; ++i) count *= shape_[i];
  return count;
}

Tensor Tensor::view(std::initializer_list<int64_t> shape) const {
  Tensor out(data_, dtype_, shape, device_);
  RS_CHECK(out.numel() == numel(), "cannot view {} as {}", shape_string(), out.shape_string());
  return out;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  RS_CHECK(ndim_ >= 1 && 0 <= begin && begin <= end && end <= shape_[0], "bad slice [{}, {}) of {}", begin, end,
           shape_string());
  const size_t row_bytes = bytes() / (shape_[0] ? shape_[0] : 1);
  Tensor out = *this;
  out.data_ = static_cast<char*>(data_) + begin * row_bytes;
  out.shape_[0] = end - begin;
  return out;
}

Tensor Tensor::select(int64_t index) const {
  Tensor row = slice_rows(index, index + 1);
  return Tensor(row.data_, dtype_, shape_.data() + 1, ndim_ - 1, device_);
}

std::string Tensor::shape_string() const {
  std::string out = "[";
  for (int i = 0; i < ndim_; ++i) out += fmt::format("{}{}", i ? ", " : "", shape_[i]);
  return out + "]";
}

}  // namespace rs
