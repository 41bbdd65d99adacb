#include "loader/quantization.h"

#include "base/error.h"

namespace rs::loader {
namespace {

using nlohmann::json;

// A string or integer field of a JSON object, `fallback` when absent or null; any other type is an rs::Error naming it.
std::string text(const json& object, const char* key, const std::string& fallback, const std::string& source) {
  if (!object.contains(key) || object[key].is_null()) return fallback;
  RS_CHECK(object[key].is_string(), "{}: quantization field '{}' must be a string, got {}", source, key,
           object[key].dump());
  return object[key].get<std::string>();
}
int64_t integer(const json& object, const char* key, int64_t fallback, const std::string& source) {
  if (!object.contains(key) || object[key].is_null()) return fallback;
  RS_CHECK(object[key].is_number_integer(), "{}: quantization field '{}' must be an integer, got {}", source, key,
           object[key].dump());
  return object[key].get<int64_t>();
}
// A [rows, cols] block shape of positive integers.
void block_shape(const json& value, const std::string& source, const char* what, int64_t& rows, int64_t& cols) {
  RS_CHECK(value.is_array() && value.size() == 2 && value[0].is_number_integer() && value[1].is_number_integer() &&
               value[0].get<int64_t>() > 0 && value[1].get<int64_t>() > 0,
           "{}: {} must be two positive integers, got {}", source, what, value.dump());
  rows = value[0].get<int64_t>();
  cols = value[1].get<int64_t>();
}

// compressed-tensors: every config group must quantize weights as 8-bit floats (the FP8 schemes: FP8, FP8_DYNAMIC,
// FP8_BLOCK). Activations may be dynamic per token or static (input_scale): W8A16 paths ignore them and W8A8 paths
// quantize activations their own way, so neither changes how the weights load.
void check_compressed_tensors(const json& q, const std::string& source, QuantizationConfig& out) {
  const std::string format = text(q, "format", "float-quantized", source);
  RS_CHECK(format == "float-quantized" || format == "naive-quantized",
           "{}: compressed-tensors format '{}' is not supported (FP8 'float-quantized' is)", source, format);
  RS_CHECK(q.contains("config_groups") && q["config_groups"].is_object() && !q["config_groups"].empty(),
           "{}: compressed-tensors quantization_config has no config_groups", source);
  for (const auto& [name, group] : q["config_groups"].items()) {
    RS_CHECK(group.is_object() && group.contains("weights") && group["weights"].is_object(),
             "{}: compressed-tensors group '{}' has no weights scheme", source, name);
    const json& w = group["weights"];
    const std::string type = text(w, "type", "", source);
    const int64_t bits = integer(w, "num_bits", 0, source);
    RS_CHECK(type == "float" && bits == 8,
             "{}: compressed-tensors group '{}' quantizes weights as {}-bit '{}'; only 8-bit float (FP8) is supported",
             source, name, bits, type);
    const std::string strategy = text(w, "strategy", "tensor", source);
    RS_CHECK(strategy == "tensor" || strategy == "channel" || strategy == "block",
             "{}: compressed-tensors weight strategy '{}' is not supported (tensor, channel or block)", source,
             strategy);
    if (strategy == "block" && w.contains("block_structure"))
      block_shape(w["block_structure"], source, "compressed-tensors block_structure", out.block_rows, out.block_cols);
  }
}

// MLX's affine bits: 2, 4 and 8 are read as stored; 3, 5 and 6 (one bit stream per row) are widened to 8-bit codes.
void check_bits(int64_t bits, const std::string& source, const std::string& what) {
  RS_CHECK(bits >= 2 && bits <= 8 && bits != 7, "{}: {} quantizes to {} bits; supported: 2, 3, 4, 5, 6 and 8", source,
           what, bits);
}
void check_group(int64_t group, const std::string& source, const std::string& what) {
  RS_CHECK(group >= 16 && (group & (group - 1)) == 0,
           "{}: {} has group size {}; supported: a power of two of at least 16 (32, 64, 128, ...)", source, what,
           group);
}

// mlx_lm: {"group_size": 64, "bits": 4, "mode": "affine", "<module path>": {"group_size", "bits"} or false, ...}.
void parse_mlx(const json& q, const std::string& source, QuantizationConfig& out) {
  const std::string mode = text(q, "mode", "affine", source);
  RS_CHECK(mode == "affine", "{}: MLX quantization mode '{}' is not supported (affine)", source, mode);
  out.bits = static_cast<int32_t>(integer(q, "bits", 4, source));
  out.group_size = integer(q, "group_size", 64, source);
  check_bits(out.bits, source, "MLX quantization");
  check_group(out.group_size, source, "MLX quantization");
  for (const auto& [path, value] : q.items()) {
    if (!value.is_object()) continue;  // false (left unquantized), or a global field
    const int64_t bits = integer(value, "bits", out.bits, source);
    check_bits(bits, source, "module '" + path + "'");
    check_group(integer(value, "group_size", out.group_size, source), source, "module '" + path + "'");
  }
}

void parse_awq(const json& q, const std::string& source, QuantizationConfig& out) {
  out.bits = static_cast<int32_t>(integer(q, "bits", integer(q, "w_bit", 4, source), source));
  out.group_size = integer(q, "group_size", integer(q, "q_group_size", 128, source), source);
  RS_CHECK(out.bits == 4, "{}: AWQ with {} bits is not supported (4)", source, out.bits);
  check_group(out.group_size, source, "AWQ");
  const std::string version = text(q, "version", "gemm", source);
  RS_CHECK(version == "gemm" || version == "GEMM",
           "{}: AWQ version '{}' is not supported (the GEMM layout, which AutoAWQ writes by default)", source, version);
  RS_CHECK(!q.contains("zero_point") || q["zero_point"].is_null() || q["zero_point"].is_boolean(),
           "{}: quantization field 'zero_point' must be a boolean", source);
}

void parse_gptq(const json& q, const std::string& source, QuantizationConfig& out) {
  out.bits = static_cast<int32_t>(integer(q, "bits", 4, source));
  out.group_size = integer(q, "group_size", 128, source);
  RS_CHECK(out.bits == 4 || out.bits == 8, "{}: GPTQ with {} bits is not supported (4 or 8)", source, out.bits);
  RS_CHECK(out.group_size != -1, "{}: GPTQ without groups (group_size -1) is not supported yet", source);
  check_group(out.group_size, source, "GPTQ");
  for (const char* key : {"desc_act", "sym"})
    RS_CHECK(!q.contains(key) || q[key].is_null() || q[key].is_boolean(),
             "{}: quantization field '{}' must be a boolean", source, key);
  const std::string format = text(q, "checkpoint_format", "gptq", source);
  RS_CHECK(format == "gptq" || format == "gptq_v2", "{}: GPTQ checkpoint_format '{}' is not supported (gptq, gptq_v2)",
           source, format);
  out.gptq_zero_minus_one = format == "gptq";
}

}  // namespace

QuantizationConfig parse_quantization_config(const json& config, const std::string& source,
                                             const std::string& on_load) {
  QuantizationConfig out;
  RS_CHECK(on_load.empty() || on_load == "fp8", "--quantization '{}' is not supported (fp8)", on_load);
  const char* key = config.contains("quantization_config") ? "quantization_config"
                    : config.contains("quantization")      ? "quantization"
                                                           : nullptr;
  if (key == nullptr || !config[key].is_object()) {
    out.fp8_on_load = on_load == "fp8";
    return out;
  }
  const json& q = config[key];
  // mlx_lm writes {group_size, bits} under `quantization` (and again under quantization_config) with no quant_method.
  const bool mlx = !q.contains("quant_method") && (q.contains("bits") || q.contains("group_size"));
  out.method_name = mlx ? "mlx" : text(q, "quant_method", "unknown", source);
  if (mlx) {
    out.method = QuantMethod::kMlxAffine;
    parse_mlx(q, source, out);
  } else if (out.method_name == "awq") {
    out.method = QuantMethod::kAwq;
    parse_awq(q, source, out);
  } else if (out.method_name == "gptq") {
    out.method = QuantMethod::kGptq;
    parse_gptq(q, source, out);
  } else if (out.method_name == "mxfp4") {
    out.method = QuantMethod::kMxfp4;
  } else if (out.method_name == "fp8") {
    out.method = QuantMethod::kFp8;
    if (q.contains("weight_block_size") && !q["weight_block_size"].is_null())
      block_shape(q["weight_block_size"], source, "quantization_config.weight_block_size", out.block_rows,
                  out.block_cols);
    const std::string fmt = text(q, "fmt", "e4m3", source);
    RS_CHECK(fmt == "e4m3", "{}: FP8 format '{}' is not supported (e4m3)", source, fmt);
  } else if (out.method_name == "compressed-tensors") {
    out.method = QuantMethod::kCompressedTensors;
    check_compressed_tensors(q, source, out);
  } else {
    RS_FAIL(
        "{}: quantization '{}' is not supported yet (supported: fp8, compressed-tensors FP8, mxfp4, MLX affine, "
        "awq, gptq)",
        source, out.method_name);
  }
  // A checkpoint that is already quantized loads as stored; --quantization applies to unquantized checkpoints only.
  RS_CHECK(on_load.empty() || out.method == QuantMethod::kNone,
           "--quantization {}: {} is already quantized ({}); drop the flag", on_load, source, out.method_name);
  return out;
}

}  // namespace rs::loader
