#include "loader/gguf/gguf_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <regex>
#include <set>
#include <thread>

#include "base/error.h"
#include "base/thread_pool.h"
#include "loader/gguf/blocks.h"

namespace rs::loader::gguf {
namespace fs = std::filesystem;

namespace {

// GGUF block tensor names (llama.cpp's LLM_TENSOR_NAMES) -> Hugging Face module names, within "model.layers.N.".
// Expert stacks take mlx_lm's stacked names, which LinearLoader::load_expert reads.
const std::map<std::string, std::string>& layer_modules() {
  static const std::map<std::string, std::string> modules = {
      {"attn_norm", "input_layernorm"},
      {"post_attention_norm", "post_attention_layernorm"},  // gpt-oss, Qwen3-Next, Qwen3.5 (their ffn_norm)
      {"ffn_norm", "post_attention_layernorm"},
      {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"},
      {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"},
      {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
      {"ffn_gate_inp", "mlp.gate"},
      {"ffn_gate_exps", "mlp.switch_mlp.gate_proj"},
      {"ffn_up_exps", "mlp.switch_mlp.up_proj"},
      {"ffn_down_exps", "mlp.switch_mlp.down_proj"},
      {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
      {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
      {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
      {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"},
  };
  return modules;
}

struct MappedName {
  std::string name;  // the Hugging Face tensor ("model.layers.0.self_attn.q_proj.weight")
  std::string part;  // the GGUF part ("attn_q"; "" outside blocks)
};

// gpt-oss names some parts differently (mlp.router, self_attn.sinks without ".weight", post_attention_norm).
std::optional<MappedName> arch_name(const std::string& arch, const std::string& layer, const std::string& part,
                                    const std::string& suffix) {
  if (arch != "gpt-oss") return std::nullopt;
  const std::string prefix = "model.layers." + layer + ".";
  if (part == "attn_sinks") return MappedName{prefix + "self_attn.sinks", part};
  if (part == "ffn_gate_inp") return MappedName{prefix + "mlp.router." + suffix, part};
  return std::nullopt;
}

std::optional<MappedName> hf_name(const std::string& name, const std::string& arch) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  const std::string base = name.substr(0, dot), suffix = name.substr(dot + 1);
  if (suffix != "weight" && suffix != "bias") return std::nullopt;
  if (base == "token_embd") return MappedName{"model.embed_tokens." + suffix, ""};
  if (base == "output_norm") return MappedName{"model.norm." + suffix, ""};
  if (base == "output") return MappedName{"lm_head." + suffix, ""};
  static const std::regex kBlock(R"(blk\.(\d+)\.(.+))");
  std::smatch match;
  if (!std::regex_match(base, match, kBlock)) return std::nullopt;
  if (auto special = arch_name(arch, match[1].str(), match[2].str(), suffix)) return special;
  const auto module = layer_modules().find(match[2].str());
  if (module == layer_modules().end()) return std::nullopt;
  return MappedName{"model.layers." + match[1].str() + "." + module->second + "." + suffix, match[2].str()};
}

bool hybrid_qwen(const std::string& arch) { return arch == "qwen3next" || arch == "qwen35" || arch == "qwen35moe"; }

std::vector<int64_t> hf_shape(const std::vector<int64_t>& ne) { return {ne.rbegin(), ne.rend()}; }

int64_t rows_of(const TensorRecord& record) {
  int64_t rows = 1;
  for (size_t d = 1; d < record.ne.size(); ++d) rows *= record.ne[d];
  return rows;
}

// Llama's q/k rows in Hugging Face order: convert_hf_to_gguf.py stores row h*hd + 2i + j of head h (RoPE pairs
// interleaved, as ggml's normal RoPE reads them) where Hugging Face has row h*hd + j*hd/2 + i.
std::shared_ptr<const std::vector<int64_t>> llama_rows(int64_t rows, int32_t heads) {
  RS_CHECK(heads > 0 && rows % heads == 0 && (rows / heads) % 2 == 0, "cannot un-permute {} rows as {} heads", rows,
           heads);
  const int64_t head_dim = rows / heads, half = head_dim / 2;
  auto order = std::make_shared<std::vector<int64_t>>(rows);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < half; ++i) (*order)[h * head_dim + j * half + i] = h * head_dim + 2 * i + j;
  return order;
}

// out row r = in row order[r], rows of `row_bytes`.
Buffer gather_rows(const Buffer& in, const std::vector<int64_t>& order, size_t row_bytes) {
  Buffer out = Buffer::host(order.size() * row_bytes);
  for (size_t r = 0; r < order.size(); ++r)
    std::memcpy(static_cast<uint8_t*>(out.data()) + r * row_bytes,
                static_cast<const uint8_t*>(in.data()) + order[r] * row_bytes, row_bytes);
  return out;
}

int32_t metadata_int(const nlohmann::json& metadata, const std::string& key) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) return 0;
  if (it->is_number_integer()) return it->get<int32_t>();
  if (it->is_array() && !it->empty() && it->front().is_number_integer()) return it->front().get<int32_t>();
  return 0;
}

}  // namespace

std::vector<fs::path> model_files(const std::vector<fs::path>& paths) {
  RS_CHECK(!paths.empty(), "no .gguf files");
  static const std::regex kSplit(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
  std::set<std::string> models;
  std::map<int, fs::path> parts;
  int count = 0;
  for (const auto& path : paths) {
    std::smatch match;
    const std::string name = path.filename().string();
    if (std::regex_match(name, match, kSplit)) {
      models.insert(match[1].str());
      parts[std::stoi(match[2].str())] = path;
      count = std::stoi(match[3].str());
    } else {
      models.insert(name);
    }
  }
  if (models.size() != 1) {
    std::vector<std::string> names;
    for (const auto& path : paths) names.push_back(path.filename().string());
    RS_FAIL("{}: holds {} GGUF models ({}); pass the one to serve as --model FILE.gguf",
            paths.front().parent_path().string(), models.size(), fmt::join(names, ", "));
  }
  if (parts.empty()) return paths;
  std::vector<fs::path> out;
  for (int k = 1; k <= count; ++k) {
    RS_CHECK(parts.count(k), "{}: split part {} of {} is missing", paths.front().parent_path().string(), k, count);
    out.push_back(parts[k]);
  }
  return out;
}

GgufWeights::~GgufWeights() = default;

GgufWeights::GgufWeights(const std::vector<fs::path>& files) {
  RS_CHECK(!files.empty(), "no GGUF files to read");
  for (const auto& path : files) files_.push_back(std::make_unique<GgufFile>(path));
  const nlohmann::json& meta = metadata();
  if (files_.size() > 1 || meta.contains("split.count")) {
    const int32_t count = metadata_int(meta, "split.count");
    RS_CHECK(count == static_cast<int32_t>(files_.size()), "{}: split.count says {} parts, {} given",
             files_.front()->path().string(), count, files_.size());
    for (size_t k = 0; k < files_.size(); ++k)
      RS_CHECK(metadata_int(files_[k]->metadata(), "split.no") == static_cast<int32_t>(k),
               "{}: not part {} of the split", files_[k]->path().string(), k + 1);
  }
  const std::string arch = meta.value("general.architecture", std::string());
  const int32_t heads = metadata_int(meta, arch + ".attention.head_count");
  const int32_t kv_heads = metadata_int(meta, arch + ".attention.head_count_kv");
  for (const auto& file : files_) {
    for (const TensorRecord& record : file->tensors()) {
      RS_CHECK(records_.emplace(record.name, &record).second, "{}: tensor '{}' appears twice", file->path().string(),
               record.name);
      // gpt-oss's expert stacks become Hugging Face's interleaved gate|up tensors (add_gpt_oss_experts).
      if (arch == "gpt-oss" && record.name.find("_exps.") != std::string::npos) continue;
      // The hybrid Qwen models' gated delta nets take Hugging Face's layout in add_hybrid_qwen_layers.
      if (hybrid_qwen(arch) &&
          (record.name.find(".ssm_") != std::string::npos || record.name.find(".attn_qkv.") != std::string::npos ||
           record.name.find(".attn_gate.") != std::string::npos))
        continue;
      const auto mapped = hf_name(record.name, arch);
      if (!mapped) continue;  // read by the config (rope_freqs) or by nothing radixserve serves
      // A type of unknown block size has no byte count, so its data was never checked against the file (and its row
      // count, from the header alone, may be anything).
      RS_CHECK(record.bytes > 0, "{}: tensor '{}' has ggml type {}, which radixserve cannot read",
               file->path().string(), record.name, static_cast<uint32_t>(record.type));
      std::shared_ptr<const std::vector<int64_t>> rows;
      if (arch == "llama" && (mapped->part == "attn_q" || mapped->part == "attn_k"))
        rows = llama_rows(record.ne.size() == 1 ? record.ne[0] : rows_of(record),
                          mapped->part == "attn_q" || kv_heads == 0 ? heads : kv_heads);
      add_mapped(mapped->name, record, rows);
    }
  }
  if (arch == "gpt-oss") add_gpt_oss_experts(block_count());
  if (hybrid_qwen(arch)) add_hybrid_qwen_layers(arch, block_count());
}

void GgufWeights::release_converted() {
  std::lock_guard lock(mutex_);
  converted_.clear();
  built_.clear();
  pool_.reset();
}

int32_t GgufWeights::block_count() const {
  const std::string arch = metadata().value("general.architecture", std::string());
  const int32_t layers = metadata_int(metadata(), arch + ".block_count");
  RS_CHECK(layers >= 0 && static_cast<size_t>(layers) <= records_.size(), "{}: {}.block_count is {} for {} tensors",
           files_.front()->path().string(), arch, layers, records_.size());
  return layers;
}

void GgufWeights::add_mapped(const std::string& name, const TensorRecord& record,
                             std::shared_ptr<const std::vector<int64_t>> rows,
                             std::shared_ptr<const std::vector<int64_t>> cols, std::vector<int64_t> shape) {
  const GgufFile* file = file_holding(record);
  const auto layout = affine_layout(record.type);
  const bool stored_float =
      record.type == GgmlType::kF32 || record.type == GgmlType::kF16 || record.type == GgmlType::kBF16;
  RS_CHECK(stored_float || layout,
           "{}: tensor '{}' is {}; radixserve reads GGUF tensors in F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
           "Q2_K, Q3_K, Q4_K, Q5_K and Q6_K (MXFP4 for gpt-oss experts; requantize the file with llama-quantize to one "
           "of them)",
           file->path().string(), record.name, type_name(record.type));
  std::vector<int64_t> hf = shape;  // given whole, or the stored shape with the selected rows
  if (hf.empty()) {
    hf = hf_shape(record.ne);
    if (rows) hf[record.ne.size() > 1 ? hf.size() - 2 : 0] = static_cast<int64_t>(rows->size());
  }
  Entry entry{&record, file, Part::kStored, DType::kF32, hf};
  entry.rows = std::move(rows);
  entry.cols = std::move(cols);
  const bool matrix = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 && record.ne.size() >= 2 &&
                      name.find("norm") == std::string::npos;
  if (layout && matrix && !entry.cols) {
    const std::string module = name.substr(0, name.size() - 7);
    Entry codes = entry, scales = entry;
    codes.part = Part::kCodes;
    codes.dtype = DType::kU32;
    codes.shape.back() = record.ne[0] * layout->bits / 32;
    scales.part = Part::kScales;
    scales.shape.back() = record.ne[0] / layout->group;
    Entry biases = scales;
    biases.part = Part::kBiases;
    entries_.emplace(name, codes);
    entries_.emplace(module + ".scales", scales);
    entries_.emplace(module + ".biases", biases);
    return;
  }
  if (layout || entry.rows || entry.cols) {
    entry.part = Part::kDecoded;
  } else {
    entry.dtype = record.type == GgmlType::kF32   ? DType::kF32
                  : record.type == GgmlType::kF16 ? DType::kF16
                                                  : DType::kBF16;
  }
  entries_.emplace(name, std::move(entry));
}

const GgufFile* GgufWeights::file_holding(const TensorRecord& record) const {
  for (const auto& f : files_)
    if (&record >= f->tensors().data() && &record < f->tensors().data() + f->tensors().size()) return f.get();
  return files_.front().get();
}

const TensorRecord& GgufWeights::require_record(const std::string& gguf_name) const {
  const TensorRecord* found = record(gguf_name);
  RS_CHECK(found != nullptr, "{}: no tensor '{}'", files_.front()->path().string(), gguf_name);
  return *found;
}

void GgufWeights::add_built(const std::string& name, const TensorRecord& source, DType dtype,
                            std::vector<int64_t> shape, std::function<void(uint8_t*)> build) {
  Entry entry{&source, file_holding(source), Part::kBuilt, dtype, std::move(shape)};
  entry.build = std::move(build);
  entries_.emplace(name, std::move(entry));
}

const TensorRecord* GgufWeights::record(const std::string& gguf_name) const {
  const auto it = records_.find(gguf_name);
  return it == records_.end() ? nullptr : it->second;
}

ThreadPool& GgufWeights::pool() const {
  if (!pool_) pool_ = std::make_unique<ThreadPool>(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return *pool_;
}

const GgufWeights::Converted& GgufWeights::convert(const Entry& entry) const {
  std::lock_guard lock(mutex_);
  const ConvertedKey key{entry.record, entry.rows.get(), entry.cols.get()};
  auto it = converted_.find(key);
  if (it != converted_.end()) return it->second;
  const TensorRecord& record = *entry.record;
  // A 1-D tensor reorders element by element.
  const int64_t rows = record.ne.size() == 1 ? record.ne[0] : rows_of(record);
  const int64_t in = record.ne.size() == 1 ? 1 : record.ne[0];
  Converted out;
  if (entry.part == Part::kDecoded) {
    out.values = Buffer::host(rows * in * sizeof(float));
    decode_f32(record.type, record.data, rows * in, static_cast<float*>(out.values.data()));
    if (entry.rows) out.values = gather_rows(out.values, *entry.rows, in * sizeof(float));
    if (entry.cols) {
      const int64_t kept = static_cast<int64_t>(out.values.bytes() / (in * sizeof(float)));
      Buffer permuted = Buffer::host(kept * entry.cols->size() * sizeof(float));
      const auto* src = static_cast<const float*>(out.values.data());
      auto* dst = static_cast<float*>(permuted.data());
      const int64_t width = static_cast<int64_t>(entry.cols->size());
      for (int64_t r = 0; r < kept; ++r)
        for (int64_t c = 0; c < width; ++c) dst[r * width + c] = src[r * in + (*entry.cols)[c]];
      out.values = std::move(permuted);
    }
  } else {
    const AffineLayout layout = *affine_layout(record.type);
    const int64_t groups = in / layout.group;
    out.codes = Buffer::host(rows * in * layout.bits / 8);
    out.scales = Buffer::host(rows * groups * sizeof(float));
    out.biases = Buffer::host(rows * groups * sizeof(float));
    // Rows decode independently: a multi-GB model's blocks over every core.
    const int64_t row_bytes = in * layout.bits / 8, block_bytes = static_cast<int64_t>(record.bytes) / rows;
    pool().parallel_for(
        rows,
        [&](int64_t begin, int64_t end) {
          decode_affine(record.type, record.data + begin * block_bytes, end - begin, in,
                        static_cast<uint8_t*>(out.codes.data()) + begin * row_bytes,
                        static_cast<float*>(out.scales.data()) + begin * groups,
                        static_cast<float*>(out.biases.data()) + begin * groups);
        },
        64);
    if (entry.rows) {
      out.codes = gather_rows(out.codes, *entry.rows, in * layout.bits / 8);
      out.scales = gather_rows(out.scales, *entry.rows, groups * sizeof(float));
      out.biases = gather_rows(out.biases, *entry.rows, groups * sizeof(float));
    }
  }
  return converted_.emplace(key, std::move(out)).first->second;
}

Tensor GgufWeights::tensor(const std::string& name) const {
  const auto it = entries_.find(name);
  RS_CHECK(it != entries_.end(), "{}: no tensor '{}'", files_.front()->path().string(), name);
  const Entry& entry = it->second;
  const std::vector<int64_t>& shape = entry.shape;
  void* data = nullptr;
  if (entry.part == Part::kStored) {
    data = const_cast<uint8_t*>(entry.record->data);
  } else if (entry.part == Part::kBuilt) {
    std::lock_guard lock(mutex_);
    auto built = built_.find(name);
    if (built == built_.end()) {
      int64_t count = 1;
      for (int64_t d : shape) count *= d;
      Buffer buffer = Buffer::host(count * dtype_size(entry.dtype));
      entry.build(static_cast<uint8_t*>(buffer.data()));
      built = built_.emplace(name, std::move(buffer)).first;
    }
    data = built->second.data();
  } else {
    const Converted& converted = convert(entry);
    const Buffer& buffer = entry.part == Part::kCodes    ? converted.codes
                           : entry.part == Part::kScales ? converted.scales
                           : entry.part == Part::kBiases ? converted.biases
                                                         : converted.values;
    data = const_cast<void*>(buffer.data());
  }
  return Tensor(data, entry.dtype, shape.data(), static_cast<int>(shape.size()));
}

std::string GgufWeights::file_of(const std::string& name) const {
  const auto it = entries_.find(name);
  return (it == entries_.end() ? files_.front()->path() : it->second.file->path()).string();
}

std::vector<std::string> GgufWeights::names() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : entries_) out.push_back(name);
  return out;
}

size_t GgufWeights::total_bytes() const {
  size_t total = 0;
  for (const auto& file : files_)
    for (const auto& record : file->tensors()) total += record.bytes;
  return total;
}

}  // namespace rs::loader::gguf
