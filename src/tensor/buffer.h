// Buffer: owning, move-only memory from a backend (or the host), which Tensors view.
#pragma once

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <utility>

#include "tensor/tensor.h"

namespace rs {

class Buffer {
 public:
  using Deleter = std::function<void(void*)>;

  Buffer() = default;
  Buffer(void* data, size_t bytes, Device device, Deleter deleter)
      : data_(data), bytes_(bytes), device_(device), deleter_(std::move(deleter)) {}
  // Host memory, 64-byte aligned, zero-filled.
  static Buffer host(size_t bytes);

  ~Buffer() { reset(); }
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
      device_ = other.device_;
      deleter_ = std::move(other.deleter_);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

  // A tensor view over the start of this buffer.
  Tensor tensor(DType dtype, std::initializer_list<int64_t> shape) const;

 private:
  void reset() {
    if (data_ && deleter_) deleter_(data_);
    data_ = nullptr;
    bytes_ = 0;
  }

  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_{};
  Deleter deleter_;
};

}  // namespace rs
