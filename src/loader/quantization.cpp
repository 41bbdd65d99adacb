#include "loader/quantization.h"

#include "base/error.h"

namespace rs::loader {
namespace {

using nlohmann::json;

// compressed-tensors: every config group must quantize weights as 8-bit floats (the FP8 schemes: FP8, FP8_DYNAMIC,
// FP8_BLOCK). Activations may be dynamic per token or static (input_scale): W8A16 paths ignore them and W8A8 paths
// quantize activations their own way, so neither changes how the weights load.
void check_compressed_tensors(const json& q, const std::string& source, QuantizationConfig& out) {
  const std::string format = q.value("format", "float-quantized");
  RS_CHECK(format == "float-quantized" || format == "naive-quantized",
           "{}: compressed-tensors format '{}' is not supported (FP8 'float-quantized' is)", source, format);
  RS_CHECK(q.contains("config_groups") && q["config_groups"].is_object() && !q["config_groups"].empty(),
           "{}: compressed-tensors quantization_config has no config_groups", source);
  for (const auto& [name, group] : q["config_groups"].items()) {
    RS_CHECK(group.is_object() && group.contains("weights") && group["weights"].is_object(),
             "{}: compressed-tensors group '{}' has no weights scheme", source, name);
    const json& w = group["weights"];
    const std::string type = w.value("type", "");
    const int64_t bits = w.value("num_bits", int64_t{0});
    RS_CHECK(type == "float" && bits == 8,
             "{}: compressed-tensors group '{}' quantizes weights as {}-bit '{}'; only 8-bit float (FP8) is supported",
             source, name, bits, type);
    const std::string strategy = w.value("strategy", "tensor");
    RS_CHECK(strategy == "tensor" || strategy == "channel" || strategy == "block",
             "{}: compressed-tensors weight strategy '{}' is not supported (tensor, channel or block)", source,
             strategy);
    if (strategy == "block" && w.contains("block_structure") && w["block_structure"].is_array() &&
        w["block_structure"].size() == 2) {
      out.block_rows = w["block_structure"][0].get<int64_t>();
      out.block_cols = w["block_structure"][1].get<int64_t>();
    }
  }
}

}  // namespace

QuantizationConfig parse_quantization_config(const json& config, const std::string& source,
                                             const std::string& on_load) {
  QuantizationConfig out;
  RS_CHECK(on_load.empty() || on_load == "fp8", "--quantization '{}' is not supported (fp8)", on_load);
  const char* key = config.contains("quantization_config") ? "quantization_config" : nullptr;
  if (key == nullptr || !config[key].is_object()) {
    out.fp8_on_load = on_load == "fp8";
    return out;
  }
  const json& q = config[key];
  out.method_name = q.value("quant_method", std::string("unknown"));
  if (out.method_name == "mxfp4") {
    out.method = QuantMethod::kMxfp4;
  } else if (out.method_name == "fp8") {
    out.method = QuantMethod::kFp8;
    if (q.contains("weight_block_size") && q["weight_block_size"].is_array()) {
      const json& block = q["weight_block_size"];
      RS_CHECK(block.size() == 2 && block[0].is_number_integer() && block[1].is_number_integer() &&
                   block[0].get<int64_t>() > 0 && block[1].get<int64_t>() > 0,
               "{}: quantization_config.weight_block_size must be two positive integers, got {}", source, block.dump());
      out.block_rows = block[0].get<int64_t>();
      out.block_cols = block[1].get<int64_t>();
    }
    const std::string fmt = q.value("fmt", std::string("e4m3"));
    RS_CHECK(fmt == "e4m3", "{}: FP8 format '{}' is not supported (e4m3)", source, fmt);
  } else if (out.method_name == "compressed-tensors") {
    out.method = QuantMethod::kCompressedTensors;
    check_compressed_tensors(q, source, out);
  } else {
    RS_FAIL("{}: quantization '{}' is not supported yet (supported: fp8, compressed-tensors FP8, mxfp4)", source,
            out.method_name);
  }
  // A checkpoint that is already quantized loads as stored; --quantization applies to unquantized checkpoints only.
  RS_CHECK(on_load.empty() || out.method == QuantMethod::kNone,
           "--quantization {}: {} is already quantized ({}); drop the flag", on_load, source, out.method_name);
  return out;
}

}  // namespace rs::loader
