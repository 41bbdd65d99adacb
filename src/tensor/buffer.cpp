#include "tensor/buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace rs {

Buffer Buffer::host(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* data = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!data) throw std::bad_alloc();
  std::memset(data, 0, rounded);
  return Buffer(data, bytes, Device{}, [](void* p) { std::free(p); });
}

Tensor Buffer::tensor(DType dtype, std::initializer_list<int64_t> shape) const {
  Tensor out(data_, dtype, shape, device_);
  RS_CHECK(out.bytes() <= bytes_, "view {} of {} needs {} bytes, buffer has {}", out.shape_string(), dtype_name(dtype),
           out.bytes(), bytes_);
  return out;
}

}  // namespace rs
