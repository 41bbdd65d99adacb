#include "loader/gguf/gguf_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <regex>
#include <set>

#include "base/error.h"
#include "loader/gguf/blocks.h"

namespace rs::loader::gguf {
namespace fs = std::filesystem;

namespace {

// GGUF block tensor names (llama.cpp's LLM_TENSOR_NAMES) -> Hugging Face module names, within "model.layers.N.".
// Expert stacks take mlx_lm's stacked names, which LinearLoader::load_expert reads.
const std::map<std::string, std::string>& layer_modules() {
  static const std::map<std::string, std::string> modules = {
      {"attn_norm", "input_layernorm"},
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
  };
  return modules;
}

struct MappedName {
  std::string module;  // Hugging Face module ("model.layers.0.self_attn.q_proj")
  std::string suffix;  // "weight" or "bias"
  std::string part;    // the GGUF part ("attn_q"; "" outside blocks)
};

std::optional<MappedName> hf_name(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  const std::string base = name.substr(0, dot), suffix = name.substr(dot + 1);
  if (suffix != "weight" && suffix != "bias") return std::nullopt;
  if (base == "token_embd") return MappedName{"model.embed_tokens", suffix, ""};
  if (base == "output_norm") return MappedName{"model.norm", suffix, ""};
  if (base == "output") return MappedName{"lm_head", suffix, ""};
  static const std::regex kBlock(R"(blk\.(\d+)\.(.+))");
  std::smatch match;
  if (!std::regex_match(base, match, kBlock)) return std::nullopt;
  const auto module = layer_modules().find(match[2].str());
  if (module == layer_modules().end()) return std::nullopt;
  return MappedName{"model.layers." + match[1].str() + "." + module->second, suffix, match[2].str()};
}

std::vector<int64_t> hf_shape(const std::vector<int64_t>& ne) { return {ne.rbegin(), ne.rend()}; }

int64_t rows_of(const TensorRecord& record) {
  int64_t rows = 1;
  for (size_t d = 1; d < record.ne.size(); ++d) rows *= record.ne[d];
  return rows;
}

// Llama's q/k rows back in Hugging Face order: convert_hf_to_gguf.py stores row h*hd + 2i + j of head h (RoPE pairs
// interleaved, as ggml's normal RoPE reads them) where Hugging Face has row h*hd + j*hd/2 + i.
void unpermute_rows(uint8_t* data, int64_t rows, size_t row_bytes, int32_t heads) {
  RS_CHECK(heads > 0 && rows % heads == 0 && (rows / heads) % 2 == 0, "cannot un-permute {} rows as {} heads", rows,
           heads);
  const int64_t head_dim = rows / heads, half = head_dim / 2;
  std::vector<uint8_t> copy(data, data + rows * row_bytes);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < half; ++i)
        std::memcpy(data + (h * head_dim + j * half + i) * row_bytes,
                    copy.data() + (h * head_dim + 2 * i + j) * row_bytes, row_bytes);
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
      const auto mapped = hf_name(record.name);
      if (!mapped) continue;  // read by the config (rope_freqs) or by nothing radixserve serves
      const auto layout = affine_layout(record.type);
      const bool stored_float =
          record.type == GgmlType::kF32 || record.type == GgmlType::kF16 || record.type == GgmlType::kBF16;
      RS_CHECK(stored_float || layout,
               "{}: tensor '{}' is {}; radixserve reads GGUF tensors in F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
               "Q4_K, Q5_K and Q6_K (requantize the file with llama-quantize to one of them)",
               file->path().string(), record.name, type_name(record.type));
      Entry entry{&record, file.get(), Part::kStored, DType::kF32, hf_shape(record.ne)};
      if (arch == "llama" && mapped->part == "attn_q") entry.permute_heads = heads;
      if (arch == "llama" && mapped->part == "attn_k") entry.permute_heads = kv_heads > 0 ? kv_heads : heads;
      const std::string name = mapped->module + "." + mapped->suffix;
      if (layout && record.ne.size() >= 2 && mapped->suffix == "weight") {
        Entry codes = entry, scales = entry;
        codes.part = Part::kCodes;
        codes.dtype = DType::kU32;
        codes.shape.back() = record.ne[0] * layout->bits / 32;
        scales.part = Part::kScales;
        scales.shape.back() = record.ne[0] / layout->group;
        Entry biases = scales;
        biases.part = Part::kBiases;
        entries_.emplace(name, codes);
        entries_.emplace(mapped->module + ".scales", scales);
        entries_.emplace(mapped->module + ".biases", biases);
        continue;
      }
      if (layout || entry.permute_heads > 0) {
        entry.part = Part::kDecoded;
      } else {
        entry.dtype = record.type == GgmlType::kF32   ? DType::kF32
                      : record.type == GgmlType::kF16 ? DType::kF16
                                                      : DType::kBF16;
      }
      entries_.emplace(name, entry);
    }
  }
}

const TensorRecord* GgufWeights::record(const std::string& gguf_name) const {
  const auto it = records_.find(gguf_name);
  return it == records_.end() ? nullptr : it->second;
}

const GgufWeights::Converted& GgufWeights::convert(const Entry& entry) const {
  std::lock_guard lock(mutex_);
  auto it = converted_.find(entry.record);
  if (it != converted_.end()) return it->second;
  const TensorRecord& record = *entry.record;
  const int64_t rows = rows_of(record), in = record.ne[0];
  Converted out;
  if (entry.part == Part::kDecoded) {
    out.values = Buffer::host(rows * in * sizeof(float));
    decode_f32(record.type, record.data, rows * in, static_cast<float*>(out.values.data()));
    if (entry.permute_heads > 0 && record.ne.size() == 1)  // a bias: one element per row
      unpermute_rows(static_cast<uint8_t*>(out.values.data()), in, sizeof(float), entry.permute_heads);
    else if (entry.permute_heads > 0)
      unpermute_rows(static_cast<uint8_t*>(out.values.data()), rows, in * sizeof(float), entry.permute_heads);
  } else {
    const AffineLayout layout = *affine_layout(record.type);
    const int64_t groups = in / layout.group;
    out.codes = Buffer::host(rows * in * layout.bits / 8);
    out.scales = Buffer::host(rows * groups * sizeof(float));
    out.biases = Buffer::host(rows * groups * sizeof(float));
    decode_affine(record.type, record.data, rows, in, static_cast<uint8_t*>(out.codes.data()),
                  static_cast<float*>(out.scales.data()), static_cast<float*>(out.biases.data()));
    if (entry.permute_heads > 0) {
      unpermute_rows(static_cast<uint8_t*>(out.codes.data()), rows, in * layout.bits / 8, entry.permute_heads);
      unpermute_rows(static_cast<uint8_t*>(out.scales.data()), rows, groups * sizeof(float), entry.permute_heads);
      unpermute_rows(static_cast<uint8_t*>(out.biases.data()), rows, groups * sizeof(float), entry.permute_heads);
    }
  }
  return converted_.emplace(entry.record, std::move(out)).first->second;
}

Tensor GgufWeights::tensor(const std::string& name) const {
  const auto it = entries_.find(name);
  RS_CHECK(it != entries_.end(), "{}: no tensor '{}'", files_.front()->path().string(), name);
  const Entry& entry = it->second;
  const std::vector<int64_t>& shape = entry.shape;
  void* data = nullptr;
  if (entry.part == Part::kStored) {
    data = const_cast<uint8_t*>(entry.record->data);
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
