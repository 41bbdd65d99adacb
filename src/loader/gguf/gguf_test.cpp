// GGUF reading: the container (gguf_file), the quantized blocks against ggml's dequantize loops transcribed as they are
// written in ggml-quants.c (a second, loop-for-loop reading of the layouts), and the Hugging Face view of the tensors.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "base/error.h"
#include "loader/gguf/blocks.h"
#include "loader/gguf/gguf_config.h"
#include "loader/gguf/gguf_file.h"
#include "loader/gguf/gguf_tokenizer.h"
#include "tensor/dtype.h"

namespace rs::loader::gguf {
namespace {

// A GGUF v3 file in memory.
class Writer {
 public:
  void string_kv(const std::string& key, const std::string& value) {
    kv(key, 8);
    str(value);
    ++keys_;
  }
  void u32_kv(const std::string& key, uint32_t value) {
    kv(key, 4);
    put(value);
    ++keys_;
  }
  void f32_kv(const std::string& key, float value) {
    kv(key, 6);
    put(value);
    ++keys_;
  }
  void strings_kv(const std::string& key, const std::vector<std::string>& values) {
    kv(key, 9);
    put(uint32_t{8});
    put(uint64_t{values.size()});
    for (const auto& v : values) str(v);
    ++keys_;
  }
  void tensor(const std::string& name, GgmlType type, std::vector<uint64_t> ne, const std::vector<uint8_t>& bytes) {
    tensors_.push_back({name, type, std::move(ne), bytes});
  }
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out;
    const auto put_to = [&](const void* p, size_t n) {
      out.insert(out.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    };
    const uint32_t magic = 0x46554747, version = 3;
    const uint64_t count = tensors_.size(), keys = keys_;
    put_to(&magic, 4);
    put_to(&version, 4);
    put_to(&count, 8);
    put_to(&keys, 8);
    out.insert(out.end(), meta_.begin(), meta_.end());
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
      const uint64_t length = t.name.size();
      const uint32_t dims = static_cast<uint32_t>(t.ne.size()), type = static_cast<uint32_t>(t.type);
      put_to(&length, 8);
      put_to(t.name.data(), length);
      put_to(&dims, 4);
      for (uint64_t n : t.ne) put_to(&n, 8);
      put_to(&type, 4);
      put_to(&offset, 8);
      offset += (t.bytes.size() + 31) / 32 * 32;
    }
    out.resize((out.size() + 31) / 32 * 32);
    for (const auto& t : tensors_) {
      out.insert(out.end(), t.bytes.begin(), t.bytes.end());
      out.resize((out.size() + 31) / 32 * 32);
    }
    return out;
  }

 private:
  template <typename T>
  void put(T value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    meta_.insert(meta_.end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    put(uint64_t{s.size()});
    meta_.insert(meta_.end(), s.begin(), s.end());
  }
  void kv(const std::string& key, uint32_t type) {
    str(key);
    put(type);
  }
  struct Tensor_ {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> ne;
    std::vector<uint8_t> bytes;
  };
  std::vector<uint8_t> meta_;
  uint64_t keys_ = 0;
  std::vector<Tensor_> tensors_;
};

uint16_t to_half(float f) {
  // Exact for the small normal values used here.
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000, exponent = ((x >> 23) & 0xff) - 127 + 15, mantissa = (x >> 13) & 0x3ff;
  return static_cast<uint16_t>(sign | (exponent << 10) | mantissa);
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

// Sets the f16 at `at` to a small random normal value (random bytes there could be inf or NaN).
void set_half(std::vector<uint8_t>& b, size_t at, std::mt19937& rng) {
  const float value = std::uniform_real_distribution<float>(-0.05f, 0.05f)(rng);
  const uint16_t h = to_half(value == 0 ? 0.01f : value);
  std::memcpy(b.data() + at, &h, 2);
}

float h(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return f16_to_f32(bits);
}

// ggml-quants.c's dequantize_row_q4_K / q5_K / q6_K / q8_0 / q4_0 for one block, loop for loop.
void ggml_q4_k(const uint8_t* x, float* y, bool five) {
  const float d = h(x), min = h(x + 2);
  const uint8_t* scales = x + 4;
  const uint8_t* qh = x + 16;
  const uint8_t* q = x + (five ? 48 : 16);
  auto get = [&](int j, uint8_t& sc, uint8_t& m) {
    if (j < 4) {
      sc = scales[j] & 63;
      m = scales[j + 4] & 63;
    } else {
      sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
      m = (scales[j + 4] >> 4) | ((scales[j - 0] >> 6) << 4);
    }
  };
  int is = 0;
  uint8_t sc, m, u1 = 1, u2 = 2;
  for (int j = 0; j < 256; j += 64) {
    get(is + 0, sc, m);
    const float d1 = d * sc, m1 = min * m;
    get(is + 1, sc, m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((q[l] & 0xF) + (five && (qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((q[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - m2;
    q += 32;
    is += 2;
    u1 <<= 2;
    u2 <<= 2;
  }
}

void ggml_q6_k(const uint8_t* x, float* y) {
  const float d = h(x + 208);
  const uint8_t* ql = x;
  const uint8_t* qh = x + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(x + 192);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int8_t q1 = static_cast<int8_t>((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int8_t q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int8_t q3 = static_cast<int8_t>((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int8_t q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l + 0] = d * sc[is + 0] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

void ggml_q2_k(const uint8_t* x, float* y) {
  const float d = h(x + 80), min = h(x + 82);
  const uint8_t* q = x + 16;
  int is = 0;
  for (int n = 0; n < 256; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      uint8_t sc = x[is++];
      float dl = d * (sc & 0xF), ml = min * (sc >> 4);
      for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<int8_t>((q[l] >> shift) & 3) - ml;
      sc = x[is++];
      dl = d * (sc & 0xF), ml = min * (sc >> 4);
      for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<int8_t>((q[l + 16] >> shift) & 3) - ml;
      shift += 2;
    }
    q += 32;
  }
}

void ggml_q3_k(const uint8_t* x, float* y) {
  constexpr uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t aux[4] = {};
  std::memcpy(aux, x + 96, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  const auto* scales = reinterpret_cast<const int8_t*>(aux);
  const float d_all = h(x + 108);
  const uint8_t* q = x + 32;
  const uint8_t* hm = x;
  uint8_t m = 1;
  int is = 0;
  for (int n = 0; n < 256; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      float dl = d_all * (scales[is++] - 32);
      for (int l = 0; l < 16; ++l) *y++ = dl * (static_cast<int8_t>((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
      dl = d_all * (scales[is++] - 32);
      for (int l = 0; l < 16; ++l)
        *y++ = dl * (static_cast<int8_t>((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
      shift += 2;
      m <<= 1;
    }
    q += 32;
  }
}

void ggml_legacy(GgmlType type, const uint8_t* x, float* y) {
  const float d = h(x);
  switch (type) {
    case GgmlType::kQ8_0:
      for (int j = 0; j < 32; ++j) y[j] = static_cast<int8_t>(x[2 + j]) * d;
      return;
    case GgmlType::kQ4_0:
      for (int j = 0; j < 16; ++j) {
        y[j] = ((x[2 + j] & 0x0F) - 8) * d;
        y[j + 16] = ((x[2 + j] >> 4) - 8) * d;
      }
      return;
    case GgmlType::kQ4_1:
      for (int j = 0; j < 16; ++j) {
        y[j] = (x[4 + j] & 0x0F) * d + h(x + 2);
        y[j + 16] = (x[4 + j] >> 4) * d + h(x + 2);
      }
      return;
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1: {
      const bool one = type == GgmlType::kQ5_1;
      uint32_t qh;
      std::memcpy(&qh, x + (one ? 4 : 2), 4);
      const uint8_t* qs = x + (one ? 8 : 6);
      for (int j = 0; j < 16; ++j) {
        const uint8_t xh_0 = ((qh >> (j + 0)) << 4) & 0x10;
        const uint8_t xh_1 = ((qh >> (j + 12))) & 0x10;
        const int x0 = ((qs[j] & 0x0F) | xh_0) - (one ? 0 : 16);
        const int x1 = ((qs[j] >> 4) | xh_1) - (one ? 0 : 16);
        y[j] = one ? x0 * d + h(x + 2) : x0 * d;
        y[j + 16] = one ? x1 * d + h(x + 2) : x1 * d;
      }
      return;
    }
    default: FAIL();
  }
}

struct Case {
  GgmlType type;
  std::vector<size_t> halves;  // byte offsets of f16 fields in a block
};

TEST(GgufBlocks, DecodeMatchesGgmlLoopsBitForBit) {
  const Case cases[] = {{GgmlType::kQ4_0, {0}},    {GgmlType::kQ4_1, {0, 2}}, {GgmlType::kQ5_0, {0}},
                        {GgmlType::kQ5_1, {0, 2}}, {GgmlType::kQ8_0, {0}},    {GgmlType::kQ4_K, {0, 2}},
                        {GgmlType::kQ5_K, {0, 2}}, {GgmlType::kQ6_K, {208}},  {GgmlType::kQ2_K, {80, 82}},
                        {GgmlType::kQ3_K, {108}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(type_name(c.type));
    const BlockShape block = block_shape(c.type);
    const int64_t blocks = 6, rows = 3, in = blocks / rows * block.elements;
    std::vector<uint8_t> data = random_bytes(blocks * block.bytes, static_cast<uint32_t>(c.type));
    std::mt19937 rng(7);
    for (int64_t k = 0; k < blocks; ++k)
      for (size_t at : c.halves) set_half(data, k * block.bytes + at, rng);
    std::vector<float> want(blocks * block.elements), got(want.size());
    for (int64_t k = 0; k < blocks; ++k) {
      const uint8_t* x = data.data() + k * block.bytes;
      float* y = want.data() + k * block.elements;
      if (c.type == GgmlType::kQ4_K || c.type == GgmlType::kQ5_K)
        ggml_q4_k(x, y, c.type == GgmlType::kQ5_K);
      else if (c.type == GgmlType::kQ6_K)
        ggml_q6_k(x, y);
      else if (c.type == GgmlType::kQ2_K)
        ggml_q2_k(x, y);
      else if (c.type == GgmlType::kQ3_K)
        ggml_q3_k(x, y);
      else
        ggml_legacy(c.type, x, y);
    }
    decode_f32(c.type, data.data(), static_cast<int64_t>(want.size()), got.data());
    // Equal as numbers (ggml's (q - 8) d is -0.0 where scale q + bias gives +0.0 for q = 8 and d < 0).
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(want[i], got[i]) << "element " << i;

    // The affine form (codes and (scale, bias) pairs) gives the same values: scale * code + bias.
    const AffineLayout layout = *affine_layout(c.type);
    std::vector<uint8_t> codes(rows * in * layout.bits / 8);
    std::vector<float> scales(rows * in / layout.group), biases(scales.size());
    decode_affine(c.type, data.data(), rows, in, codes.data(), scales.data(), biases.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < in; ++i) {
        const int64_t bit = i * layout.bits;
        const int code = (codes[r * in * layout.bits / 8 + bit / 8] >> (bit % 8)) & ((1 << layout.bits) - 1);
        const int64_t g = r * (in / layout.group) + i / layout.group;
        ASSERT_EQ(scales[g] * static_cast<float>(code) + biases[g], want[r * in + i]) << "row " << r << " col " << i;
      }
  }
}

TEST(GgufFile, ParsesMetadataAndTensors) {
  Writer w;
  w.string_kv("general.architecture", "qwen3");
  w.u32_kv("qwen3.block_count", 2);
  w.f32_kv("qwen3.attention.layer_norm_rms_epsilon", 1e-6f);
  w.strings_kv("tokenizer.ggml.tokens", {"a", "b"});
  std::vector<uint8_t> f32(4 * 8);
  w.tensor("output_norm.weight", GgmlType::kF32, {8}, f32);
  w.tensor("blk.0.attn_q.weight", GgmlType::kQ8_0, {32, 2}, std::vector<uint8_t>(68));
  const auto bytes = w.bytes();
  const GgufFile file("mem.gguf", bytes.data(), bytes.size());
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.metadata()["general.architecture"], "qwen3");
  EXPECT_EQ(file.metadata()["qwen3.block_count"], 2);
  EXPECT_EQ(file.metadata()["tokenizer.ggml.tokens"][1], "b");
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.tensors()[1].name, "blk.0.attn_q.weight");
  EXPECT_EQ(file.tensors()[1].bytes, 68u);
  EXPECT_EQ(file.tensors()[1].ne, (std::vector<int64_t>{32, 2}));
  EXPECT_EQ(file.tensors()[1].data - bytes.data(), file.tensors()[0].data - bytes.data() + 32);
}

TEST(GgufFile, CorruptFilesFailWithTheReason) {
  Writer w;
  w.string_kv("general.architecture", "qwen3");
  w.tensor("blk.0.attn_q.weight", GgmlType::kQ8_0, {32, 2}, std::vector<uint8_t>(68));
  const auto bytes = w.bytes();
  const auto fails = [](std::vector<uint8_t> b, const std::string& needle) {
    SCOPED_TRACE(needle);
    try {
      GgufFile("bad.gguf", b.data(), b.size());
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  fails({bytes.begin(), bytes.end() - 40}, "runs past the end");  // truncated data
  fails({bytes.begin(), bytes.begin() + 100}, "truncated GGUF");  // truncated tensor records
  auto bad_magic = bytes;
  bad_magic[0] = 'X';
  fails(bad_magic, "no GGUF magic");
  auto bad_version = bytes;
  bad_version[4] = 9;
  fails(bad_version, "version 9");
  auto huge_count = bytes;
  huge_count[15] = 0x7f;  // tensor count's high byte
  fails(huge_count, "corrupt GGUF header");
  Writer odd;
  odd.tensor("x.weight", GgmlType::kQ4_K, {100, 1}, std::vector<uint8_t>(144));
  const auto odd_bytes = odd.bytes();
  fails(odd_bytes, "not a multiple of 256");
}

TEST(GgufConfig, UnservedArchitecturesAndTokenizersAreNamed) {
  nlohmann::json meta = {{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", {"a"}}};
  try {
    hf_tokenizer(meta);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer model 'llama'"), std::string::npos) << e.what();
  }
  meta = {{"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.pre", "falcon"}, {"tokenizer.ggml.tokens", {"a"}}};
  try {
    hf_tokenizer(meta);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pre-tokenizer 'falcon'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(hf_tokenizer(nlohmann::json::object()).has_value());
}

TEST(GgufTokenizer, AddedTokensAndTemplateFromTokenTypes) {
  const nlohmann::json meta = {{"tokenizer.ggml.model", "gpt2"},
                               {"tokenizer.ggml.pre", "llama-bpe"},
                               {"tokenizer.ggml.tokens", {"a", "b", "ab", "<|bos|>", "<tool>", "[PAD5]"}},
                               {"tokenizer.ggml.token_type", {1, 1, 1, 3, 4, 5}},
                               {"tokenizer.ggml.merges", {"a b"}},
                               {"tokenizer.ggml.bos_token_id", 3},
                               {"tokenizer.ggml.add_bos_token", true},
                               {"tokenizer.chat_template", "{{ bos_token }}"}};
  const auto out = hf_tokenizer(meta);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->tokenizer["model"]["vocab"].size(), 3u);
  EXPECT_EQ(out->tokenizer["model"]["ignore_merges"], true);
  ASSERT_EQ(out->tokenizer["added_tokens"].size(), 2u);
  EXPECT_EQ(out->tokenizer["added_tokens"][0]["special"], true);
  EXPECT_EQ(out->tokenizer["added_tokens"][1]["special"], false);
  EXPECT_EQ(out->tokenizer["post_processor"]["type"], "TemplateProcessing");
  EXPECT_EQ(out->tokenizer_config["bos_token"], "<|bos|>");
  EXPECT_EQ(out->tokenizer_config["chat_template"], "{{ bos_token }}");
}

}  // namespace
}  // namespace rs::loader::gguf
