// Tensor: a non-owning, row-major view {data, dtype, shape, device}. Buffer (buffer.h) owns memory.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "base/error.h"
#include "tensor/dtype.h"

namespace rs {

enum class DeviceKind : uint8_t { kCpu, kCuda, kMetal };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  bool operator==(const Device&) const = default;
  bool is_cpu() const { return kind == DeviceKind::kCpu; }
};

std::string device_name(Device device);

// A contiguous row-major view. Ops that need other layouts take explicit row strides.
class Tensor {
 public:
  static constexpr int kMaxDims = 5;

  Tensor() = default;
  Tensor(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device = {});
  Tensor(void* data, DType dtype, const int64_t* shape, int ndim, Device device = {});

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int ndim() const { return ndim_; }
  int64_t dim(int axis) const;  // negative axes count from the end
  int64_t numel() const;
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool empty() const { return data_ == nullptr; }
  // Product of all dims but the last: the number of rows of a 2-D interpretation.
  int64_t rows() const { return ndim_ == 0 ? 1 : numel() / dim(-1); }

  // Same data, new shape (numel must match).
  Tensor view(std::initializer_list<int64_t> shape) const;
  // Rows [begin, end) along axis 0.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // Element i along axis 0, one dimension fewer.
  Tensor select(int64_t index) const;

  std::string shape_string() const;

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Device device_{};
  int ndim_ = 0;
  std::array<int64_t, kMaxDims> shape_{};
};

}  // namespace rs
