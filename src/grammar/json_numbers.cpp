#include "grammar/json_numbers.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "grammar/int_range.h"

namespace rs::grammar {
namespace {

using json = nlohmann::ordered_json;

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw Error(fmt::format("invalid JSON schema at {}: {}", path, message));
}

// A bound: minimum/maximum with exclusiveMinimum/exclusiveMaximum, the tighter of the pair (draft 4's boolean
// exclusiveMinimum makes minimum itself exclusive).
struct Bound {
  double value = 0;
  bool exclusive = false;
};

std::optional<Bound> bound(const json& schema, bool lower, const std::string& path) {
  const char* key = lower ? "minimum" : "maximum";
  const char* exclusive_key = lower ? "exclusiveMinimum" : "exclusiveMaximum";
  const auto read = [&](const char* name) -> std::optional<double> {
    if (!schema.contains(name) || schema[name].is_boolean()) return std::nullopt;
    if (!schema[name].is_number()) fail(path + "/" + name, "must be a number");
    const double v = schema[name].get<double>();
    if (!std::isfinite(v) || std::fabs(v) > 9.0e15) fail(path + "/" + name, "bounds above 9e15 are not supported");
    return v;
  };
  std::optional<Bound> out;
  if (const auto v = read(key))
    out = Bound{
        *v, schema.contains(exclusive_key) && schema[exclusive_key].is_boolean() && schema[exclusive_key].get<bool>()};
  if (const auto v = read(exclusive_key))
    if (!out || (lower ? *v >= out->value : *v <= out->value)) out = Bound{*v, true};
  return out;
}

// The integers within the bounds, as exact integer bounds (fractional bounds round inwards).
std::pair<std::optional<int64_t>, std::optional<int64_t>> integer_bounds(const json& schema, const std::string& path) {
  std::optional<int64_t> lo, hi;
  if (const auto b = bound(schema, true, path))
    lo = static_cast<int64_t>(b->exclusive ? std::floor(b->value) + 1 : std::ceil(b->value));
  if (const auto b = bound(schema, false, path))
    hi = static_cast<int64_t>(b->exclusive ? std::ceil(b->value) - 1 : std::floor(b->value));
  if (lo && hi && *lo > *hi) fail(path, "no integer satisfies the minimum and maximum");
  return {lo, hi};
}

// A non-negative decimal bound: integer part and fraction digits (no trailing zeros), as the shortest decimal that
// reads back as the schema's double (what was written: 0.1 is "0" + "1", not 0.1000000000000000055...).
struct Decimal {
  int64_t whole = 0;
  std::string fraction;
};

constexpr size_t kMaxFractionDigits = 40;

Decimal to_decimal(double value, const std::string& path) {
  std::string text = fmt::format("{}", std::fabs(value));  // shortest round-trip form, maybe with an exponent
  int exponent = 0;
  if (const size_t e = text.find_first_of("eE"); e != std::string::npos) {
    exponent = std::stoi(text.substr(e + 1));
    text.resize(e);
  }
  const size_t dot = text.find('.');
  std::string digits = dot == std::string::npos ? text : text.substr(0, dot) + text.substr(dot + 1);
  int64_t point = static_cast<int64_t>(dot == std::string::npos ? text.size() : dot) + exponent;  // digits before it
  if (point < 0) {
    digits.insert(0, static_cast<size_t>(-point), '0');
    point = 0;
  }
  if (point > static_cast<int64_t>(digits.size())) digits.append(static_cast<size_t>(point) - digits.size(), '0');
  Decimal out;
  const std::string whole = digits.substr(0, static_cast<size_t>(point));
  out.whole = whole.empty() ? 0 : std::stoll(whole);
  out.fraction = digits.substr(static_cast<size_t>(point));
  while (!out.fraction.empty() && out.fraction.back() == '0') out.fraction.pop_back();
  if (out.fraction.size() > kMaxFractionDigits)
    fail(path, fmt::format("bounds with more than {} fractional digits are not supported", kMaxFractionDigits));
  return out;
}

bool is_zero(std::string_view digits) { return digits.find_first_not_of('0') == std::string_view::npos; }

Expr digit_range(char lo, char hi) {
  return Expr::char_class({{static_cast<char32_t>(lo), static_cast<char32_t>(hi)}});
}
Expr any_digits() { return Expr::repeat(Expr::char_class({{'0', '9'}}), 0, -1); }

// Fraction digit strings g (possibly empty; value 0.g) with lo <= g (lo < g when lo_open) and g <= hi (g < hi when
// hi_open; no hi: below 1, i.e. any). Returns the alternatives, each starting with a digit, and whether the empty
// string belongs too. Digit by digit, as integer ranges are built: a first digit strictly between the bounds' frees
// the rest, one equal to a bound's carries that bound on.
struct Fractions {
  std::vector<Expr> options;
  bool empty = false;
};

Expr fractions_expr(const Fractions& f) {
  if (f.options.empty()) return Expr::empty();
  Expr any = Expr::alt(f.options);
  return f.empty ? Expr::repeat(std::move(any), 0, 1) : any;
}

Fractions fractions(std::string_view lo, bool lo_open, std::optional<std::string_view> hi, bool hi_open) {
  Fractions out;
  const bool lo_zero = is_zero(lo), hi_zero = hi && is_zero(*hi);
  out.empty = lo_zero && !lo_open && (!hi || !hi_zero || !hi_open);  // g = "" is the value 0
  if (hi && hi_zero) {  // nothing above 0 from here: only zeros, when 0 itself is allowed
    if (out.empty) out.options.push_back(Expr::seq({Expr::bytes("0"), Expr::repeat(Expr::bytes("0"), 0, -1)}));
    return out;
  }
  if (lo_zero && !hi) {  // every string (with a non-zero digit somewhere when the 0 bound is open)
    if (!lo_open) {
      out.options.push_back(Expr::seq({digit_range('0', '9'), any_digits()}));
    } else {
      out.options.push_back(Expr::seq({Expr::repeat(Expr::bytes("0"), 0, -1), digit_range('1', '9'), any_digits()}));
    }
    return out;
  }
  const char l = lo.empty() ? '0' : lo[0];
  const char h = hi ? (*hi)[0] : '9';
  const std::string_view lo_rest = lo.empty() ? lo : lo.substr(1);
  const auto rest = [](const Fractions& f) { return fractions_expr(f); };
  if (hi && l == h) {  // both bounds go on
    const Fractions inner = fractions(lo_rest, lo_open, hi->substr(1), hi_open);
    if (!inner.options.empty() || inner.empty)
      out.options.push_back(Expr::seq({Expr::bytes(std::string(1, l)), rest(inner)}));
    return out;
  }
  // l < h (or no hi): the first digit equal to l keeps the lower bound, one equal to hi's keeps the upper one.
  const Fractions low = fractions(lo_rest, lo_open, std::nullopt, false);
  if (!low.options.empty() || low.empty) out.options.push_back(Expr::seq({Expr::bytes(std::string(1, l)), rest(low)}));
  const char free_last = hi ? static_cast<char>(h - 1) : '9';
  if (l + 1 <= free_last)
    out.options.push_back(Expr::seq({digit_range(static_cast<char>(l + 1), free_last), any_digits()}));
  if (hi) {
    const Fractions high = fractions("", false, hi->substr(1), hi_open);
    if (!high.options.empty() || high.empty)
      out.options.push_back(Expr::seq({Expr::bytes(std::string(1, h)), rest(high)}));
  }
  return out;
}

// The text after an integer part whose fraction must lie in the given range: nothing (the value 0.g = 0), or "."
// and at least one digit.
std::optional<Expr> fraction_suffix(const Fractions& f) {
  std::vector<Expr> options;
  if (f.empty) options.push_back(Expr::empty());
  if (!f.options.empty()) options.push_back(Expr::seq({Expr::bytes("."), Expr::alt(f.options)}));
  if (options.empty()) return std::nullopt;
  return Expr::alt(std::move(options));
}

// Unsigned decimals (no exponent) from a to b (b nullopt: unbounded), each end open or closed, exactly: integer parts
// strictly inside are followed by any fraction, the end ones by fractions bounded as above.
Expr magnitude(const Decimal& a, bool a_open, const std::optional<Decimal>& b, bool b_open) {
  std::vector<Expr> options;
  const auto add = [&](int64_t whole, const Fractions& f) {
    if (auto suffix = fraction_suffix(f)) options.push_back(Expr::seq({Expr::bytes(std::to_string(whole)), *suffix}));
  };
  if (b && a.whole == b->whole) {
    add(a.whole, fractions(a.fraction, a_open, std::string_view(b->fraction), b_open));
  } else {
    add(a.whole, fractions(a.fraction, a_open, std::nullopt, false));
    const int64_t first = a.whole + 1;
    if (!b) {
      options.push_back(
          Expr::seq({integer_range(first, std::nullopt), Expr::repeat(Expr::ref("json-fraction"), 0, 1)}));
    } else {
      if (first <= b->whole - 1)
        options.push_back(
            Expr::seq({integer_range(first, b->whole - 1), Expr::repeat(Expr::ref("json-fraction"), 0, 1)}));
      add(b->whole, fractions("", false, std::string_view(b->fraction), b_open));
    }
  }
  return Expr::alt(std::move(options));
}

}  // namespace

std::optional<Expr> bounded_integer(const json& schema, const std::string& path) {
  const auto [lo, hi] = integer_bounds(schema, path);
  if (!lo && !hi) return std::nullopt;
  return integer_range(lo, hi);
}

// Numbers within their bounds, exactly (exclusive and fractional ones too); bounded numbers are written without an
// exponent.
std::optional<Expr> bounded_number(const json& schema, const std::string& path) {
  const auto lo = bound(schema, true, path), hi = bound(schema, false, path);
  if (!lo && !hi) return std::nullopt;
  if (lo && hi && (lo->value > hi->value || (lo->value == hi->value && (lo->exclusive || hi->exclusive))))
    fail(path, "no number satisfies the minimum and maximum");
  const auto magnitude_of = [&](const std::optional<Bound>& b) { return to_decimal(b->value, path); };
  const Decimal zero;
  std::vector<Expr> options;
  if (!hi || hi->value > 0 || (!hi->exclusive && hi->value == 0)) {  // values >= 0, unsigned
    const bool from_lo = lo && lo->value >= 0;
    options.push_back(magnitude(from_lo ? magnitude_of(lo) : zero, from_lo && lo->exclusive,
                                hi ? std::optional<Decimal>(magnitude_of(hi)) : std::nullopt, hi && hi->exclusive));
  }
  if (!lo || lo->value < 0) {  // values < 0: "-" and a magnitude above 0 (or above -hi)
    const bool from_hi = hi && hi->value < 0;
    options.push_back(
        Expr::seq({Expr::bytes("-"),
                   magnitude(from_hi ? magnitude_of(hi) : zero, from_hi ? hi->exclusive : true,
                             lo ? std::optional<Decimal>(magnitude_of(lo)) : std::nullopt, lo && lo->exclusive)}));
  }
  return Expr::alt(std::move(options));
}

}  // namespace rs::grammar
