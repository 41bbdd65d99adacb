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

// How a rank's shard of a tensor is cut from the whole (WeightSource::Shard).
enum class ShardCut { kWhole, kRows, kKvHeadRows, kColumns, kRankZeroOnly };

ShardCut shard_cut(const std::string& name) {
  for (const char* suffix :
       {"q_proj.weight", "q_proj.bias", "gate_proj.weight", "up_proj.weight", "self_attn.sinks", "lm_head.weight"})
    if (ends_with(name, suffix)) return ShardCut::kRows;
  for (const char* suffix : {"k_proj.weight", "k_proj.bias", "v_proj.weight", "v_proj.bias"})
    if (ends_with(name, suffix)) return ShardCut::kKvHeadRows;
  if (ends_with(name, "o_proj.weight") || ends_with(name, "down_proj.weight")) return ShardCut::kColumns;
  if (ends_with(name, "o_proj.bias") || ends_with(name, "down_proj.bias")) return ShardCut::kRankZeroOnly;
  return ShardCut::kWhole;
}

}  // namespace

WeightSource WeightSource::sharded(const Shard& shard) const {
  RS_CHECK(shard.size >= 1 && shard.rank >= 0 && shard.rank < shard.size, "rank {} of {}", shard.rank, shard.size);
  RS_CHECK(shard.size == 1 || (shard.num_kv_heads > 0 && shard.head_dim > 0 &&
                               (shard.num_kv_heads % shard.size == 0 || shard.size % shard.num_kv_heads == 0)),
           "{} KV heads cannot be split over {} ranks (one must divide the other)", shard.num_kv_heads, shard.size);
  WeightSource source;
  source.checkpoint_ = checkpoint_;
  source.seed_ = seed_;
  source.dummy_dtype_ = dummy_dtype_;
  source.dummy_layout_ = dummy_layout_;
  source.fill_pool_ = fill_pool_;
  source.shard_ = shard;
  return source;
}

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
  const ShardCut cut = shard_.size > 1 ? shard_cut(name) : ShardCut::kWhole;
  if (cut == ShardCut::kRows && !out.shape.empty()) out.shape[0] /= shard_.size;
  if (cut == ShardCut::kKvHeadRows && !out.shape.empty())
    out.shape[0] = shard_.num_kv_heads >= shard_.size ? out.shape[0] / shard_.size : shard_.head_dim;
  if (cut == ShardCut::kColumns && out.shape.size() == 2) out.shape[1] /= shard_.size;
  return out;
}

Tensor WeightSource::require(const std::string& name, std::initializer_list<int64_t> shape,
                             std::optional<DType> dtype) {
  return require(name, std::vector<int64_t>(shape), dtype);
}

Tensor WeightSource::require(const std::string& name, const std::vector<int64_t>& shape, std::optional<DType> dtype) {
  const ShardCut cut = shard_.size > 1 ? shard_cut(name) : ShardCut::kWhole;
  if (cut == ShardCut::kWhole) return require_whole(name, shape, dtype);
  RS_CHECK(!shape.empty() && (cut != ShardCut::kColumns || shape.size() == 2),
           "tensor '{}' of shape {} cannot be sharded", name, shape_text(shape));
  const int64_t rank = shard_.rank, ranks = shard_.size;
  std::vector<int64_t> whole = shape;
  int64_t first_row = 0;
  if (cut == ShardCut::kRows) {
    whole[0] = shape[0] * ranks;
    first_row = shape[0] * rank;
  } else if (cut == ShardCut::kKvHeadRows) {
    const int64_t heads = shard_.num_kv_heads, hd = shard_.head_dim;
    whole[0] = heads * hd;
    RS_CHECK(shape[0] * std::min(heads, ranks) == whole[0], "tensor '{}': {} rows is no rank's share of {} KV heads",
             name, shape[0], heads);
    first_row = heads >= ranks ? shape[0] * rank : rank * heads / ranks * hd;  // replicated: the rank's one head
  } else if (cut == ShardCut::kColumns) {
    whole[1] = shape[1] * ranks;
  }
  const size_t loaded_before = bytes_loaded_;
  const size_t owned_before = owned_buffers_.size();
  const Tensor full = require_whole(name, whole, dtype);
  const size_t elem = dtype_size(full.dtype());
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  void* data = full.data();
  if ((cut == ShardCut::kRows || cut == ShardCut::kKvHeadRows) && checkpoint_) {
    data = static_cast<char*>(full.data()) + first_row * (numel / shape[0]) * elem;  // a view of the mapped file
  } else if (cut != ShardCut::kRankZeroOnly || rank != 0) {
    // Columns, rank-zero-only tensors elsewhere (zeros) and dummy rows (whose whole buffer is dropped): a copy.
    auto buffer = std::make_shared<Buffer>(Buffer::host(numel * elem));
    auto* out = static_cast<char*>(buffer->data());
    const auto* in = static_cast<const char*>(full.data());
    if (cut == ShardCut::kColumns) {
      const int64_t cols = shape[1], row_bytes = cols * static_cast<int64_t>(elem);
      for (int64_t row = 0; row < shape[0]; ++row)
        std::memcpy(out + row * row_bytes, in + (row * whole[1] + rank * cols) * elem, row_bytes);
    } else if (cut == ShardCut::kRankZeroOnly) {
      std::memset(out, 0, numel * elem);
    } else {
      std::memcpy(out, in + first_row * (numel / shape[0]) * elem, numel * elem);
    }
    owned_buffers_.resize(std::min(owned_buffers_.size(), owned_before));  // a dummy's whole tensor goes
    owned_buffers_.push_back(buffer);
    data = buffer->data();
  }
  bytes_loaded_ = loaded_before + numel * elem;
  loaded_.back().second = numel * elem;
  return Tensor(data, full.dtype(), shape.data(), static_cast<int>(shape.size()));
}

Tensor WeightSource::require_whole(const std::string& name, const std::vector<int64_t>& shape,
                                   std::optional<DType> dtype) {
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
