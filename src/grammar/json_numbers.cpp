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

// Unsigned decimals (no exponent) from a to b (b nullopt: unbounded), each end open or closed: the integer part is
// exact, the fraction is free inside, zeros only on a closed b, and non-zero on an open a.
Expr magnitude(int64_t a, bool a_open, std::optional<int64_t> b, bool b_open) {
  const Expr fraction = Expr::repeat(Expr::ref("json-fraction"), 0, 1);
  std::vector<Expr> options;
  if (a_open && (!b || a < *b))
    options.push_back(Expr::seq({Expr::bytes(std::to_string(a) + "."), Expr::repeat(Expr::bytes("0"), 0, -1),
                                 Expr::char_class({{'1', '9'}}), Expr::repeat(Expr::char_class({{'0', '9'}}), 0, -1)}));
  const int64_t first = a_open ? a + 1 : a;
  if (!b) {
    options.push_back(Expr::seq({integer_range(first, std::nullopt), fraction}));
  } else {
    if (first <= *b - 1) options.push_back(Expr::seq({integer_range(first, *b - 1), fraction}));
    if (!b_open && (a < *b || !a_open))
      options.push_back(
          Expr::seq({Expr::bytes(std::to_string(*b)),
                     Expr::repeat(Expr::seq({Expr::bytes("."), Expr::repeat(Expr::bytes("0"), 1, -1)}), 0, 1)}));
  }
  return Expr::alt(std::move(options));
}

}  // namespace

std::optional<Expr> bounded_integer(const json& schema, const std::string& path) {
  const auto [lo, hi] = integer_bounds(schema, path);
  if (!lo && !hi) return std::nullopt;
  return integer_range(lo, hi);
}

// Numbers within integer bounds, exactly (exclusive ones too); bounded numbers are written without an exponent.
// Fractional bounds on numbers are refused rather than rounded.
std::optional<Expr> bounded_number(const json& schema, const std::string& path) {
  const auto lo = bound(schema, true, path), hi = bound(schema, false, path);
  if (!lo && !hi) return std::nullopt;
  for (const auto& b : {lo, hi})
    if (b && b->value != std::floor(b->value))
      fail(path, "fractional bounds on numbers are not supported (integer bounds are)");
  if (lo && hi && (lo->value > hi->value || (lo->value == hi->value && (lo->exclusive || hi->exclusive))))
    fail(path, "no number satisfies the minimum and maximum");
  const auto whole = [](const std::optional<Bound>& b) { return static_cast<int64_t>(b->value); };
  std::vector<Expr> options;
  if (!hi || hi->value > 0 || (!hi->exclusive && hi->value == 0)) {  // values >= 0, unsigned
    const bool from_lo = lo && lo->value >= 0;
    options.push_back(magnitude(from_lo ? whole(lo) : 0, from_lo && lo->exclusive,
                                hi ? std::optional<int64_t>(whole(hi)) : std::nullopt, hi && hi->exclusive));
  }
  if (!lo || lo->value < 0) {  // values < 0: "-" and a magnitude above 0 (or above -hi)
    const bool from_hi = hi && hi->value < 0;
    options.push_back(Expr::seq(
        {Expr::bytes("-"), magnitude(from_hi ? -whole(hi) : 0, from_hi ? hi->exclusive : true,
                                     lo ? std::optional<int64_t>(-whole(lo)) : std::nullopt, lo && lo->exclusive)}));
  }
  return Expr::alt(std::move(options));
}

}  // namespace rs::grammar
