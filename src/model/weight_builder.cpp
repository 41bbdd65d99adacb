#include "model/weight_builder.h"

#include <algorithm>

namespace rs::model {

WeightBuilder::WeightBuilder(const loader::ModelConfig& config, loader::WeightSource& weights, Backend& backend,
                             std::vector<Buffer>& owned, Communicator* comm, bool expert_parallel)
    : config_(config),
      weights_(weights),
      backend_(backend),
      owned_(owned),
      linears_(weights, config.quantization, owned),
      comm_(comm),
      expert_parallel_(expert_parallel) {}

Tensor WeightBuilder::keep(Buffer buffer, DType dtype, std::vector<int64_t> shape) {
  owned_.push_back(std::move(buffer));
  return Tensor(owned_.back().data(), dtype, shape.data(), static_cast<int>(shape.size()), owned_.back().device());
}

Tensor WeightBuilder::to_f32(const Tensor& t, float offset) {
  const int64_t count = t.numel();
  Buffer buffer = Buffer::host(count * sizeof(float));
  float* out = static_cast<float*>(buffer.data());
  for (int64_t i = 0; i < count; ++i) {
    switch (t.dtype()) {
      case DType::kF32: out[i] = t.data_as<float>()[i]; break;
      case DType::kBF16: out[i] = bf16_to_f32(t.data_as<uint16_t>()[i]); break;
      case DType::kF16: out[i] = f16_to_f32(t.data_as<uint16_t>()[i]); break;
      default: RS_FAIL("expected a float tensor, got {}", dtype_name(t.dtype()));
    }
    out[i] += offset;
  }
  std::vector<int64_t> shape;
  for (int axis = 0; axis < t.ndim(); ++axis) shape.push_back(t.dim(axis));
  return keep(std::move(buffer), DType::kF32, shape);
}

Tensor WeightBuilder::norm_weight(const std::string& name, int64_t width) {
  const Tensor w = weights_.require(name, {width});
  return zero_centered_norm && !norms_stored_shifted ? to_f32(w, 1.0f) : w;
}

LinearWeight WeightBuilder::dense(const std::string& name, int64_t out, int64_t in, bool quantizable) {
  constexpr std::string_view kSuffix = ".weight";
  RS_CHECK(name.size() > kSuffix.size() && name.ends_with(kSuffix), "linear weight name '{}' must end in .weight",
           name);
  return linears_.load(name.substr(0, name.size() - kSuffix.size()), out, in, quantizable);
}

WeightBuilder::ExpertRange WeightBuilder::local_experts(int32_t count) const {
  if (!expert_parallel_ || !comm_ || comm_->size() == 1) return {0, count};
  RS_CHECK(count % comm_->size() == 0, "{} experts do not split over {} ranks", count, comm_->size());
  const int32_t per_rank = count / comm_->size();
  return {comm_->rank() * per_rank, per_rank};
}

LinearWeight WeightBuilder::expert(const std::string& mlp, int64_t e, int64_t count, const std::string& proj,
                                   int64_t out, int64_t in) {
  // Expert parallelism: a stacked [E, ...] module holds the rank's block of experts (WeightSource::sharded).
  if (const ExpertRange local = local_experts(static_cast<int32_t>(count)); local.count != count) {
    if (auto stacked = linears_.load_expert(mlp + "switch_mlp." + proj, e - local.first, local.count, out, in))
      return *stacked;
    return dense(mlp + "experts." + std::to_string(e) + "." + proj + ".weight", out, in);
  }
  if (auto stacked = linears_.load_expert(mlp + "switch_mlp." + proj, e, count, out, in)) return *stacked;
  return dense(mlp + "experts." + std::to_string(e) + "." + proj + ".weight", out, in);
}

LinearWeight WeightBuilder::concat(std::initializer_list<LinearWeight> parts) {
  return concat(std::span<const LinearWeight>(parts.begin(), parts.size()));
}

void WeightBuilder::release_unused(size_t from, std::span<const LinearWeight> garbage, const LinearWeight& kept) {
  // Host copies the loader made (quantized on load, repacked AWQ/GPTQ codes, scales read as f32) that only `garbage`
  // or buffers made since index `from` reference: a fused 8B model kept ~4.5 GB of its parts' copies otherwise.
  // Tensors of the checkpoint itself are file mappings, not in owned_, and stay.
  const auto kept_by = [&](const void* data) {
    return data == kept.weight.data() || data == kept.scales.data() || data == kept.input_order.data() ||
           data == kept.packed.data();
  };
  const auto owned_by_garbage = [&](const void* data) {
    for (const LinearWeight& w : garbage)
      if (data == w.weight.data() || data == w.scales.data() || data == w.input_order.data()) return true;
    return false;
  };
  // The parts were made just before `from`: the buffers made since, and a few dozen per part before, are scanned.
  const size_t scan = std::min<size_t>(owned_.size(), (owned_.size() - from) + 64 * garbage.size() + 64);
  for (size_t i = owned_.size(); i-- > owned_.size() - scan;) {
    void* data = owned_[i].data();
    if (data == nullptr || kept_by(data)) continue;
    if (i >= from || owned_by_garbage(data)) owned_[i] = Buffer();
  }
}

LinearWeight WeightBuilder::concat(std::span<const LinearWeight> parts) {
  const size_t owned_before = owned_.size();
  LinearWeight fused = linears_.stack_rows(parts);
  // Intermediates of the fusion and the parts' own copies go; what `fused` reads stays.
  release_unused(owned_before, parts, fused);
  // A backend that repacks weights reads only its packed copy: then the row-major concatenation of a dense weight is
  // dropped here (it is not a file mapping the OS could reclaim) and `weight` keeps just its shape and dtype.
  backend_.prepare_linear(fused, owned_);
  if (!fused.packed.empty() && fused.format == LinearWeight::Format::kDense && owned_.size() > owned_before &&
      owned_[owned_before].data() == fused.weight.data()) {
    owned_[owned_before] = Buffer();
    fused.weight = Tensor(nullptr, fused.weight.dtype(), {fused.out_features, fused.in_features});
  }
  return fused;
}

LinearWeight WeightBuilder::concat_rows(std::initializer_list<Tensor> parts) {
  std::vector<LinearWeight> linears;
  for (const Tensor& t : parts) linears.push_back(linears_.from_dense(t));
  return concat(linears);
}

}  // namespace rs::model
