#include "loader/weight_source.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "base/thread_pool.h"

namespace rs::loader {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_float(DType dtype) { return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16; }

// splitmix64: a fast, well-mixed generator for dummy weights.
uint64_t mix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

WeightSource WeightSource::checkpoint(const std::filesystem::path& model_dir) {
  WeightSource source;
  source.checkpoint_ = std::make_shared<Checkpoint>(model_dir);
  return source;
}

WeightSource WeightSource::dummy(uint64_t seed, DType dtype, std::vector<std::string> layout) {
  WeightSource source;
  source.seed_ = seed;
  source.dummy_dtype_ = dtype;
  source.dummy_layout_ = std::move(layout);
  return source;
}

bool WeightSource::contains(const std::string& name) const {
  if (checkpoint_) return checkpoint_->contains(name);
  return std::any_of(dummy_layout_.begin(), dummy_layout_.end(), [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  });
}

std::optional<WeightSource::TensorInfo> WeightSource::info(const std::string& name) const {
  if (!checkpoint_ || !checkpoint_->contains(name)) return std::nullopt;
  const Tensor tensor = checkpoint_->tensor(name);
  TensorInfo out{tensor.dtype(), {}};
  for (int i = 0; i < tensor.ndim(); ++i) out.shape.push_back(tensor.dim(i));
  return out;
}

Tensor WeightSource::require(const std::string& name, std::initializer_list<int64_t> shape,
                             std::optional<DType> dtype) {
  return require(name, std::vector<int64_t>(shape), dtype);
}

Tensor WeightSource::require(const std::string& name, const std::vector<int64_t>& shape, std::optional<DType> dtype) {
  if (!checkpoint_) return make_dummy(name, shape, dtype.value_or(dummy_dtype_));
  Tensor tensor = checkpoint_->tensor(name);
  std::vector<int64_t> actual;
  for (int i = 0; i < tensor.ndim(); ++i) actual.push_back(tensor.dim(i));
  RS_CHECK(actual == shape, "{}: tensor '{}' has shape {}, expected {} from config.json", checkpoint_->file_of(name),
           name, shape_text(actual), shape_text(shape));
  if (dtype) {
    RS_CHECK(tensor.dtype() == *dtype, "{}: tensor '{}' has dtype {}, expected {}", checkpoint_->file_of(name), name,
             dtype_name(tensor.dtype()), dtype_name(*dtype));
  } else {
    RS_CHECK(is_float(tensor.dtype()), "{}: tensor '{}' has dtype {}, expected F32, BF16 or F16",
             checkpoint_->file_of(name), name, dtype_name(tensor.dtype()));
  }
  bytes_loaded_ += tensor.bytes();
  loaded_.emplace_back(name, tensor.bytes());
  // Safetensors only promises 8-byte alignment of the data section (torch 64); an odd offset gets an aligned copy.
  if (reinterpret_cast<uintptr_t>(tensor.data()) % dtype_size(tensor.dtype()) != 0) {
    auto buffer = std::make_shared<Buffer>(Buffer::host(tensor.bytes()));
    std::memcpy(buffer->data(), tensor.data(), tensor.bytes());
    owned_buffers_.push_back(buffer);
    return Tensor(buffer->data(), tensor.dtype(), actual.data(), static_cast<int>(actual.size()));
  }
  return tensor;
}

Tensor WeightSource::make_dummy(const std::string& name, const std::vector<int64_t>& shape, DType dtype) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  auto buffer = std::make_shared<Buffer>(Buffer::host(numel * dtype_size(dtype)));
  const uint64_t name_seed = seed_ ^ std::hash<std::string>{}(name);
  // Norm scales 1, biases and sinks 0, MXFP4 scales near 2^-6, other matrices uniform in ±0.02 (as vLLM's dummy
  // loader). Chunks of 1 Mi values draw from their own streams, so all cores fill a large model's weights.
  const bool norm = ends_with(name, "norm.weight");
  const bool zero = ends_with(name, ".bias") || ends_with(name, "_bias") || ends_with(name, "sinks");
  const bool scales = ends_with(name, "_scales");
  RS_CHECK(dtype == DType::kU8 || dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16,
           "dummy weights cannot be {}", dtype_name(dtype));
  constexpr int64_t kChunk = int64_t{1} << 20;
  const auto fill = [&](int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      uint64_t state = name_seed ^ (static_cast<uint64_t>(chunk) * 0xd1b54a32d192ed03ull);
      const int64_t first = chunk * kChunk, last = std::min(numel, first + kChunk);
      for (int64_t i = first; i < last; ++i) {
        if (dtype == DType::kU8) {
          static_cast<uint8_t*>(buffer->data())[i] =
              scales ? static_cast<uint8_t>(119 + mix(state) % 4) : mix(state) & 0xff;
          continue;
        }
        float value = norm ? 1.0f : 0.0f;
        if (!norm && !zero)
          value = (static_cast<float>(mix(state) >> 40) / static_cast<float>(1ull << 24) - 0.5f) * 0.04f;
        if (dtype == DType::kF32) {
          static_cast<float*>(buffer->data())[i] = value;
        } else if (dtype == DType::kBF16) {
          static_cast<uint16_t*>(buffer->data())[i] = f32_to_bf16(value);
        } else {
          static_cast<uint16_t*>(buffer->data())[i] = f32_to_f16(value);
        }
      }
    }
  };
  const int64_t chunks = (numel + kChunk - 1) / kChunk;
  if (chunks <= 1) {
    fill(0, chunks);
  } else {
    if (!fill_pool_) fill_pool_ = std::make_shared<ThreadPool>(hardware_threads());
    fill_pool_->parallel_for(chunks, fill);
  }
  owned_buffers_.push_back(buffer);
  bytes_loaded_ += buffer->bytes();
  loaded_.emplace_back(name, buffer->bytes());
  return Tensor(buffer->data(), dtype, shape.data(), static_cast<int>(shape.size()));
}

void WeightSource::note_stored_as(const std::string& name, size_t bytes) {
  for (auto& [loaded_name, size] : loaded_) {
    if (loaded_name != name) continue;
    bytes_loaded_ = bytes_loaded_ - size + bytes;
    size = bytes;
    return;
  }
}

size_t WeightSource::bytes_loaded_if(const std::function<bool(std::string_view)>& pred) const {
  size_t bytes = 0;
  for (const auto& [name, size] : loaded_)
    if (pred(name)) bytes += size;
  return bytes;
}

}  // namespace rs::loader
