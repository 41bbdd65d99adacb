#include "loader/weight_source.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
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

// How a rank's shard of a tensor is cut from the whole (WeightSource::Shard): block `rank` of `size` along `axis`
// (kRows: a matrix's rows, the second axis from the end, stacked experts [E, out, in] too, or a vector's one axis;
// kColumns: the last axis; otherwise an axis from the front), whole KV heads along axis 0, or the whole tensor on
// rank 0 and zeros elsewhere.
constexpr int kRows = -2, kColumns = -1;
// kKvHeads: along `axis`, whole KV heads (a block when there are at least as many heads as ranks, else the rank's one
// head, replicated). kGroupIndex: a GPTQ g_idx cut as a block whose values become the rank's own group numbers.
struct ShardCut {
  // kHalves: along `axis`, the rank's block of each half (Qwen3.5's fused experts: gate rows, then up rows).
  enum Kind { kWhole, kBlock, kKvHeads, kRankZeroOnly, kQkvSections, kGroupIndex, kHalves } kind = kWhole;
  int axis = 0;
};

int resolve_axis(int axis, int ndim) {
  if (axis == kRows) return ndim >= 2 ? ndim - 2 : 0;
  return axis < 0 ? ndim + axis : axis;
}

ShardCut shard_cut(std::string name, bool in_major, bool gpt_oss = false, bool expert_parallel = false);

// AWQ and GPTQ store a module's tensors input-major ([in, out/8], [groups, out], ...): the rows of the weight
// [out, in] are their last axis, its columns their first.
ShardCut in_major_cut(const std::string& module, bool group_index) {
  const ShardCut weight = shard_cut(module + ".weight", false, false);
  if (weight.kind == ShardCut::kBlock && weight.axis == kRows)
    return group_index ? ShardCut{} : ShardCut{ShardCut::kBlock, kColumns};
  if (weight.kind == ShardCut::kKvHeads) return group_index ? ShardCut{} : ShardCut{ShardCut::kKvHeads, kColumns};
  if (weight.kind == ShardCut::kBlock && weight.axis == kColumns)
    return {group_index ? ShardCut::kGroupIndex : ShardCut::kBlock, 0};
  return {};
}

ShardCut shard_cut(std::string name, bool in_major, bool gpt_oss, bool expert_parallel) {
  if (expert_parallel) {
    // Whole experts per rank: per-expert modules (experts.{e}.) are a rank's or not (the model asks for its own);
    // stacked ones ([E, ...]: switch_mlp., gpt-oss's and Qwen3.5's experts.) are a block of experts.
    if (name.find(".switch_mlp.") != std::string::npos) return {ShardCut::kBlock, 0};
    const size_t at = name.find(".experts.");
    if (at != std::string::npos)
      return std::isdigit(static_cast<unsigned char>(name[at + 9])) ? ShardCut{} : ShardCut{ShardCut::kBlock, 0};
  }
  if (in_major)
    for (std::string_view part : {".qweight", ".qzeros", ".scales", ".g_idx"})
      if (ends_with(name, part)) return in_major_cut(name.substr(0, name.size() - part.size()), part == ".g_idx");
  // Integer weights' (MLX, GGUF) scales and biases [out, in / group] follow their codes [out, in * bits / 32], and
  // FP8 scales theirs (blocks, channels; a per-tensor scale, or a channel scale under a column cut, stays whole).
  for (std::string_view companion : {".scales", ".biases", ".weight_scale_inv", ".weight_scale"})
    if (ends_with(name, companion)) name = name.substr(0, name.size() - companion.size()) + ".weight";
  for (const char* suffix : {"q_proj.weight", "q_proj.bias", "gate_proj.weight", "up_proj.weight", "self_attn.sinks",
                             "lm_head.weight", "embed_tokens.weight"})
    if (ends_with(name, suffix)) return {ShardCut::kBlock, kRows};
  for (const char* suffix : {"k_proj.weight", "k_proj.bias", "v_proj.weight", "v_proj.bias"})
    if (ends_with(name, suffix)) return {ShardCut::kKvHeads, 0};
  if (ends_with(name, "o_proj.weight") || ends_with(name, "down_proj.weight")) return {ShardCut::kBlock, kColumns};
  if (ends_with(name, "o_proj.bias") || ends_with(name, "down_proj.bias")) return {ShardCut::kRankZeroOnly, 0};
  // Qwen3.5-MoE's fused experts: gate_up [E, 2I, H] (gate rows, then up rows), down [E, H, I].
  if (!gpt_oss && ends_with(name, "experts.gate_up_proj")) return {ShardCut::kHalves, 1};
  if (!gpt_oss && ends_with(name, "experts.down_proj")) return {ShardCut::kBlock, kColumns};
  // gpt-oss's stacked experts: gate_up [E, H, 2I] (gate and up interleaved, so a block keeps its pairs) or MXFP4
  // blocks [E, 2I, H/32, 16]; down [E, I, H] or MXFP4 [E, H, I/32, 16]; biases [E, 2I] and [E, H].
  if (ends_with(name, "experts.gate_up_proj") || ends_with(name, "experts.gate_up_proj_bias"))
    return {ShardCut::kBlock, -1};
  if (ends_with(name, "experts.gate_up_proj_blocks") || ends_with(name, "experts.gate_up_proj_scales") ||
      ends_with(name, "experts.down_proj"))
    return {ShardCut::kBlock, 1};
  if (ends_with(name, "experts.down_proj_blocks") || ends_with(name, "experts.down_proj_scales"))
    return {ShardCut::kBlock, 2};
  if (ends_with(name, "experts.down_proj_bias")) return {ShardCut::kRankZeroOnly, 0};
  // Gated delta nets (linear_attn.): per-key-head groups and value heads in blocks, q | k | v sections in blocks each.
  for (const char* suffix :
       {"linear_attn.in_proj_qkvz.weight", "linear_attn.in_proj_ba.weight", "linear_attn.in_proj_z.weight",
        "linear_attn.in_proj_b.weight", "linear_attn.in_proj_a.weight", "linear_attn.A_log", "linear_attn.dt_bias"})
    if (ends_with(name, suffix)) return {ShardCut::kBlock, kRows};
  if (ends_with(name, "linear_attn.out_proj.weight")) return {ShardCut::kBlock, kColumns};
  if (ends_with(name, "linear_attn.in_proj_qkv.weight") || ends_with(name, "linear_attn.conv1d.weight"))
    return {ShardCut::kQkvSections, 0};
  return {};
}

bool is_fp8_scale(const std::string& name) {
  return ends_with(name, ".weight_scale_inv") || ends_with(name, ".weight_scale");
}

// An FP8 scale that a cut of its weight leaves whole: one for the whole tensor, or one per output channel under a
// column cut (the checkpoint's shape decides; dummy values take what the rank asks for).
bool scale_stays_whole(const Checkpoint* checkpoint, const std::string& name, const ShardCut& cut,
                       const std::vector<int64_t>& shape) {
  if (!is_fp8_scale(name)) return false;
  const int axis = resolve_axis(cut.axis, static_cast<int>(shape.size()));
  if (axis < 0 || axis >= static_cast<int>(shape.size())) return true;
  if (checkpoint && checkpoint->contains(name)) {
    const Tensor whole = checkpoint->tensor(name);
    return axis >= whole.ndim() || whole.dim(axis) == 1;
  }
  return shape[axis] == 1;
}

}  // namespace

WeightSource WeightSource::sharded(const Shard& shard) const {
  RS_CHECK(shard.size >= 1 && shard.rank >= 0 && shard.rank < shard.size, "rank {} of {}", shard.rank, shard.size);
  RS_CHECK(shard.size == 1 || (shard.num_kv_heads > 0 &&
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
  ShardCut cut =
      shard_.size > 1 ? shard_cut(name, shard_.in_major, shard_.gpt_oss_experts, shard_.expert_parallel) : ShardCut{};
  const int rank_axis = resolve_axis(cut.axis, static_cast<int>(out.shape.size()));
  if (is_fp8_scale(name) &&
      (rank_axis < 0 || rank_axis >= static_cast<int>(out.shape.size()) || out.shape[rank_axis] == 1))
    cut = ShardCut{};  // one scale for the whole tensor, or per channel under a column cut
  if ((cut.kind == ShardCut::kBlock || cut.kind == ShardCut::kQkvSections || cut.kind == ShardCut::kGroupIndex ||
       cut.kind == ShardCut::kHalves) &&
      rank_axis >= 0 && rank_axis < static_cast<int>(out.shape.size())) {
    RS_CHECK(out.shape[rank_axis] % shard_.size == 0,
             "tensor '{}' of shape {} does not split over {} ranks along axis {} (integer weights: a rank's inputs "
             "must be whole groups)",
             name, shape_text(out.shape), shard_.size, rank_axis);
    out.shape[rank_axis] /= shard_.size;
  }
  if (cut.kind == ShardCut::kKvHeads && rank_axis >= 0 && rank_axis < static_cast<int>(out.shape.size()))
    out.shape[rank_axis] /= std::min<int64_t>(shard_.num_kv_heads, shard_.size);
  return out;
}

Tensor WeightSource::require(const std::string& name, std::initializer_list<int64_t> shape,
                             std::optional<DType> dtype) {
  return require(name, std::vector<int64_t>(shape), dtype);
}

Tensor WeightSource::require(const std::string& name, const std::vector<int64_t>& shape, std::optional<DType> dtype) {
  const ShardCut cut =
      shard_.size > 1 ? shard_cut(name, shard_.in_major, shard_.gpt_oss_experts, shard_.expert_parallel) : ShardCut{};
  if (cut.kind == ShardCut::kWhole || scale_stays_whole(checkpoint_.get(), name, cut, shape))
    return require_whole(name, shape, dtype);
  const int ndim = static_cast<int>(shape.size());
  const int axis = resolve_axis(cut.axis, ndim);
  RS_CHECK(axis >= 0 && axis < ndim, "tensor '{}' of shape {} cannot be sharded", name, shape_text(shape));
  const int64_t rank = shard_.rank, ranks = shard_.size;
  std::vector<int64_t> whole = shape;
  int64_t first = 0;  // the rank's first index along `axis`
  // kQkvSections: the rank's block of each of the q, k and v sections along axis 0, [whole start, rank rows).
  std::vector<std::pair<int64_t, int64_t>> sections;
  if (cut.kind == ShardCut::kBlock || cut.kind == ShardCut::kGroupIndex) {
    whole[axis] = shape[axis] * ranks;
    first = shape[axis] * rank;
  } else if (cut.kind == ShardCut::kQkvSections) {
    const int64_t key = shard_.linear_key_dim, value = shard_.linear_value_dim;
    RS_CHECK(key % ranks == 0 && value % ranks == 0 && shape[0] * ranks == 2 * key + value,
             "tensor '{}': {} rows is no rank's share of q | k | v ({} + {} + {})", name, shape[0], key, key, value);
    whole[0] = 2 * key + value;
    int64_t start = 0;
    for (const int64_t width : {key, key, value}) {
      sections.emplace_back(start + width / ranks * rank, width / ranks);
      start += width;
    }
  } else if (cut.kind == ShardCut::kHalves) {
    whole[axis] = shape[axis] * ranks;
    RS_CHECK(whole[axis] % (2 * ranks) == 0, "tensor '{}': halves of {} do not split over {} ranks", name, whole[axis],
             ranks);
    const int64_t half = whole[axis] / 2;
    sections = {{half / ranks * rank, half / ranks}, {half + half / ranks * rank, half / ranks}};
  } else if (cut.kind == ShardCut::kKvHeads) {
    // In the tensor's own units along `axis` (rows, or packed words): the rank holds min(heads, ranks)-th of it.
    const int64_t heads = shard_.num_kv_heads;
    whole[axis] = shape[axis] * std::min(heads, ranks);
    first = heads >= ranks ? shape[axis] * rank : rank * heads / ranks * shape[axis];  // replicated: its one head
  }
  const size_t loaded_before = bytes_loaded_;
  const size_t owned_before = owned_buffers_.size();
  const Tensor full = require_whole(name, whole, dtype);
  const size_t elem = dtype_size(full.dtype());
  // The block is `outer` runs of `run` bytes, `stride` bytes apart in the whole.
  int64_t outer = 1, inner = static_cast<int64_t>(elem);
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (int d = axis + 1; d < ndim; ++d) inner *= shape[d];
  const int64_t run = shape[axis] * inner, stride = whole[axis] * inner, bytes = outer * run;
  void* data = full.data();
  if ((cut.kind == ShardCut::kBlock || cut.kind == ShardCut::kKvHeads) && axis == 0 && checkpoint_) {
    data = static_cast<char*>(full.data()) + first * inner;  // leading rows: a view of the mapped file
  } else if (cut.kind != ShardCut::kRankZeroOnly || rank != 0) {
    // Inner axes, rank-zero-only tensors elsewhere (zeros) and dummy tensors (whose whole buffer is dropped): a copy.
    auto buffer = std::make_shared<Buffer>(Buffer::host(bytes));
    auto* out = static_cast<char*>(buffer->data());
    const auto* in = static_cast<const char*>(full.data());
    if (cut.kind == ShardCut::kRankZeroOnly) {
      std::memset(out, 0, bytes);
    } else if (!sections.empty()) {  // q | k | v sections, halves: each one's block, for every outer index
      for (int64_t o = 0; o < outer; ++o)
        for (const auto& [start, rows] : sections) {
          std::memcpy(out, in + o * stride + start * inner, rows * inner);
          out += rows * inner;
        }
    } else {
      for (int64_t o = 0; o < outer; ++o) std::memcpy(out + o * run, in + o * stride + first * inner, run);
    }
    if (cut.kind == ShardCut::kGroupIndex) {
      // The rank's inputs must be whole groups in order (not GPTQ's act-order): renumber them from 0.
      RS_CHECK(full.dtype() == DType::kI32, "'{}': a group index of {}", name, dtype_name(full.dtype()));
      auto* group = static_cast<int32_t*>(buffer->data());
      const int32_t base = group[0];
      for (int64_t i = 0; i < shape[0]; ++i) {
        RS_CHECK(group[i] >= base && (i == 0 || group[i] >= group[i - 1]),
                 "'{}': act-order (desc_act) GPTQ weights do not split over ranks yet: use --tensor-parallel-size 1",
                 name);
        group[i] -= base;
      }
    }
    owned_buffers_.resize(std::min(owned_buffers_.size(), owned_before));  // a dummy's whole tensor goes
    owned_buffers_.push_back(buffer);
    data = buffer->data();
  }
  bytes_loaded_ = loaded_before + bytes;
  loaded_.back().second = bytes;
  return Tensor(data, full.dtype(), shape.data(), ndim);
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
