// UTF-8 validation and lossy decoding by maximal subparts (Unicode 15 §3.9, WHATWG encoding spec).
#include "base/utf8.h"

#include <cstdint>

namespace rs::utf8 {
namespace {

struct LeadInfo {
  std::size_t length;  // total bytes of the sequence; 0 for a byte that cannot start one
  uint8_t second_low;  // allowed range of the second byte (later bytes are always 80..BF)
  uint8_t second_high;
};

LeadInfo lead_info(uint8_t byte) {
  if (byte < 0x80) return {1, 0, 0};
  if (byte >= 0xC2 && byte <= 0xDF) return {2, 0x80, 0xBF};
  if (byte == 0xE0) return {3, 0xA0, 0xBF};
  if (byte == 0xED) return {3, 0x80, 0x9F};
  if (byte >= 0xE1 && byte <= 0xEF) return {3, 0x80, 0xBF};
  if (byte == 0xF0) return {4, 0x90, 0xBF};
  if (byte >= 0xF1 && byte <= 0xF3) return {4, 0x80, 0xBF};
  if (byte == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Length of the longest prefix of the sequence at text[pos] that is consistent with some
// well-formed sequence (>= 1), and whether that prefix is a complete character.
std::size_t valid_prefix(std::string_view text, std::size_t pos, bool& complete) {
  const LeadInfo info = lead_info(static_cast<uint8_t>(text[pos]));
  complete = false;
  if (info.length == 0) return 1;
  if (info.length == 1) {
    complete = true;
    return 1;
  }
  std::size_t consumed = 1;
  for (; consumed < info.length && pos + consumed < text.size(); ++consumed) {
    const auto byte = static_cast<uint8_t>(text[pos + consumed]);
    const uint8_t low = consumed == 1 ? info.second_low : 0x80;
    const uint8_t high = consumed == 1 ? info.second_high : 0xBF;
    if (byte < low || byte > high) return consumed;
  }
  complete = consumed == info.length;
  return consumed;
}

}  // namespace

std::size_t sequence_length(std::string_view text, std::size_t pos) {
  bool complete = false;
  const std::size_t length = valid_prefix(text, pos, complete);
  return complete ? length : 0;
}

std::size_t first_invalid(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const std::size_t length = sequence_length(text, pos);
    if (length == 0) return pos;
    pos += length;
  }
  return std::string_view::npos;
}

char32_t decode(std::string_view text, std::size_t pos, std::size_t length) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  if (length == 1) return lead;
  static constexpr uint8_t kLeadMask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  char32_t code_point = lead & kLeadMask[length];
  for (std::size_t i = 1; i < length; ++i) {
    code_point = (code_point << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3F);
  }
  return code_point;
}

void append(std::string& out, char32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

std::string to_lossy(std::string_view bytes) {
  const std::size_t bad = first_invalid(bytes);
  if (bad == std::string_view::npos) return std::string(bytes);
  std::string out(bytes.substr(0, bad));
  std::size_t pos = bad;
  while (pos < bytes.size()) {
    bool complete = false;
    const std::size_t length = valid_prefix(bytes, pos, complete);
    if (complete) {
      out.append(bytes.substr(pos, length));
    } else {
      append(out, kReplacementChar);
    }
    pos += length;
  }
  return out;
}

std::size_t incomplete_tail(std::string_view bytes) {
  // A lead byte always starts a new sequence in a left-to-right parse, so look back for one.
  for (std::size_t back = 1; back <= 3 && back <= bytes.size(); ++back) {
    const std::size_t pos = bytes.size() - back;
    const auto byte = static_cast<uint8_t>(bytes[pos]);
    if (byte >= 0x80 && byte <= 0xBF) continue;  // continuation byte: keep looking back
    bool complete = false;
    const std::size_t length = valid_prefix(bytes, pos, complete);
    return !complete && length == back && lead_info(byte).length > back ? back : 0;
  }
  return 0;
}

}  // namespace rs::utf8
