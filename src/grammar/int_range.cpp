#include "grammar/int_range.h"

#include <string>

#include "base/error.h"

namespace rs::grammar {
namespace {

Expr digit_range(char lo, char hi) {
  return Expr::char_class({{static_cast<char32_t>(lo), static_cast<char32_t>(hi)}});
}

// Digit strings of equal length n with lo <= s <= hi (both of length n).
Expr same_length(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return Expr::empty();
  const size_t n = lo.size();
  if (lo.find_first_not_of('0', 1) == std::string::npos && hi.find_first_not_of('9', 1) == std::string::npos)
    return Expr::seq({digit_range(lo[0], hi[0]),
                      Expr::repeat(digit_range('0', '9'), static_cast<int32_t>(n - 1), static_cast<int32_t>(n - 1))});
  if (lo[0] == hi[0]) return Expr::seq({Expr::bytes(std::string(1, lo[0])), same_length(lo.substr(1), hi.substr(1))});
  const size_t rest = lo.size() - 1;
  std::vector<Expr> options;
  options.push_back(Expr::seq({Expr::bytes(std::string(1, lo[0])), same_length(lo.substr(1), std::string(rest, '9'))}));
  if (hi[0] - lo[0] > 1)
    options.push_back(
        Expr::seq({digit_range(lo[0] + 1, hi[0] - 1),
                   Expr::repeat(digit_range('0', '9'), static_cast<int32_t>(rest), static_cast<int32_t>(rest))}));
  options.push_back(Expr::seq({Expr::bytes(std::string(1, hi[0])), same_length(std::string(rest, '0'), hi.substr(1))}));
  return Expr::alt(std::move(options));
}

uint64_t pow10(size_t n) {
  uint64_t p = 1;
  for (size_t i = 0; i < n; ++i) p *= 10;
  return p;
}

// Naturals in [lo, hi] (hi nullopt: unbounded), as digit strings without leading zeros.
Expr naturals(uint64_t lo, std::optional<uint64_t> hi) {
  std::vector<Expr> options;
  const size_t lo_digits = std::to_string(lo).size();
  const size_t hi_digits = hi ? std::to_string(*hi).size() : 19;
  for (size_t digits = lo_digits; digits <= hi_digits; ++digits) {
    const uint64_t first = digits == 1 ? 0 : pow10(digits - 1);
    const uint64_t last = digits >= 20 ? UINT64_MAX : pow10(digits) - 1;
    const uint64_t a = std::max(lo, first);
    const uint64_t b = hi ? std::min(*hi, last) : last;
    if (a > b) continue;
    options.push_back(same_length(std::to_string(a), std::to_string(b)));
  }
  if (!hi) {  // and every number with more digits than 19
    options.push_back(Expr::seq({digit_range('1', '9'), Expr::repeat(digit_range('0', '9'), 19, -1)}));
  }
  return options.size() == 1 ? std::move(options[0]) : Expr::alt(std::move(options));
}

}  // namespace

Expr integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  RS_CHECK(!lo || !hi || *lo <= *hi, "empty integer range [{}, {}]", *lo, *hi);
  std::vector<Expr> options;
  // Negative part: -n for n in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const uint64_t n_lo = hi && *hi < 0 ? static_cast<uint64_t>(-(*hi + 1)) + 1 : 1;
    std::optional<uint64_t> n_hi;
    if (lo) n_hi = static_cast<uint64_t>(-(*lo + 1)) + 1;
    options.push_back(Expr::seq({Expr::bytes("-"), naturals(n_lo, n_hi)}));
  }
  if (!hi || *hi >= 0) {
    const uint64_t p_lo = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> p_hi;
    if (hi) p_hi = static_cast<uint64_t>(*hi);
    options.push_back(naturals(p_lo, p_hi));
  }
  return options.size() == 1 ? std::move(options[0]) : Expr::alt(std::move(options));
}

}  // namespace rs::grammar
