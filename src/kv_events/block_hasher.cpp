#include "kv_events/block_hasher.h"

#include <openssl/evp.h>

#include <random>
#include <vector>

#include "base/error.h"

namespace rs::kv_events {
namespace {

// A CBOR head (RFC 8949 §3): major type and argument, in the shortest form (what canonical encoding requires).
void cbor_head(std::vector<uint8_t>& out, uint8_t major, uint64_t value) {
  const uint8_t type = static_cast<uint8_t>(major << 5);
  if (value < 24) {
    out.push_back(type | static_cast<uint8_t>(value));
    return;
  }
  int bytes = value <= 0xff ? 1 : value <= 0xffff ? 2 : value <= 0xffffffffull ? 4 : 8;
  out.push_back(type | static_cast<uint8_t>(bytes == 1 ? 24 : bytes == 2 ? 25 : bytes == 4 ? 26 : 27));
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

void cbor_int(std::vector<uint8_t>& out, int64_t value) {
  if (value >= 0)
    cbor_head(out, 0, static_cast<uint64_t>(value));
  else
    cbor_head(out, 1, static_cast<uint64_t>(-(value + 1)));
}

memory::BlockHash sha256(const std::vector<uint8_t>& bytes) {
  memory::BlockHash digest{};
  unsigned int size = 0;
  RS_CHECK(
      EVP_Digest(bytes.data(), bytes.size(), digest.data(), &size, EVP_sha256(), nullptr) == 1 && size == digest.size(),
      "SHA-256 failed (OpenSSL)");
  return digest;
}

}  // namespace

memory::BlockHash sha256_cbor_text(std::string_view text) {
  std::vector<uint8_t> bytes;
  cbor_head(bytes, 3, text.size());
  bytes.insert(bytes.end(), text.begin(), text.end());
  return sha256(bytes);
}

BlockHasher::BlockHasher(const std::optional<std::string>& seed) {
  if (seed) {
    none_hash_ = sha256_cbor_text(*seed);
    seeded_ = true;
    return;
  }
  std::random_device random;
  for (uint8_t& byte : none_hash_) byte = static_cast<uint8_t>(random());
}

memory::BlockHash BlockHasher::hash(const memory::BlockHash* parent, std::span<const int32_t> tokens) const {
  // (parent: bytes, tokens: tuple[int], extra_keys: None) as a 3-element array.
  std::vector<uint8_t> bytes;
  bytes.reserve(40 + tokens.size() * 5);
  cbor_head(bytes, 4, 3);
  const memory::BlockHash& p = parent ? *parent : none_hash_;
  cbor_head(bytes, 2, p.size());
  bytes.insert(bytes.end(), p.begin(), p.end());
  cbor_head(bytes, 4, tokens.size());
  for (int32_t token : tokens) cbor_int(bytes, token);
  bytes.push_back(0xf6);  // null
  return sha256(bytes);
}

uint64_t external_hash(const memory::BlockHash& hash) {
  uint64_t value = 0;
  for (size_t i = hash.size() - 8; i < hash.size(); ++i) value = (value << 8) | hash[i];
  return value;
}

}  // namespace rs::kv_events
