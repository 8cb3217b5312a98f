#include "dmlops/core/dtype.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "dmlops/core/dispatch.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/half.hpp"

namespace dmlops {
namespace {

struct DataTypeInfo {
  DataType dtype;
  std::size_t size;
  std::string_view name;
  std::string_view dml_name;
};

constexpr DataTypeInfo kInfo[] = {
    {DataType::Float32, 4, "float32", "FLOAT32"}, {DataType::Float16, 2, "float16", "FLOAT16"},
    {DataType::UInt32, 4, "uint32", "UINT32"},    {DataType::UInt16, 2, "uint16", "UINT16"},
    {DataType::UInt8, 1, "uint8", "UINT8"},       {DataType::Int32, 4, "int32", "INT32"},
    {DataType::Int16, 2, "int16", "INT16"},       {DataType::Int8, 1, "int8", "INT8"},
    {DataType::Float64, 8, "float64", "FLOAT64"}, {DataType::UInt64, 8, "uint64", "UINT64"},
    {DataType::Int64, 8, "int64", "INT64"},
};

const DataTypeInfo& info(DataType dtype) {
  const auto index = static_cast<std::size_t>(dtype) - 1;
  if (index >= std::size(kInfo)) fail<DTypeError>("unknown DataType value ", static_cast<int>(dtype));
  return kInfo[index];
}

template <class T>
std::uint64_t to_bits(T value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

// double -> float rounded to odd, so that a second rounding to half is correctly rounded
// (float has 13 more significand bits than half, more than the 2 round-to-odd needs).
float round_to_odd_float(double value) {
  float r = static_cast<float>(value);
  if (!std::isfinite(value) || static_cast<double>(r) == value) return r;
  if (std::fabs(static_cast<double>(r)) > std::fabs(value)) r = std::nextafter(r, 0.0f);
  std::uint32_t bits;
  std::memcpy(&bits, &r, 4);
  bits |= 1u;
  std::memcpy(&r, &bits, 4);
  return r;
}

std::string describe(const Number& n) {
  switch (n.kind) {
    case Number::Kind::Int: return std::to_string(n.i);
    case Number::Kind::UInt: return std::to_string(n.u);
    case Number::Kind::Float: {
      std::ostringstream s;
      s.precision(17);
      s << n.f;
      return s.str();
    }
  }
  return "?";
}

}  // namespace

std::size_t element_size(DataType dtype) { return info(dtype).size; }
std::string_view name(DataType dtype) { return info(dtype).name; }
std::string_view dml_name(DataType dtype) { return info(dtype).dml_name; }

bool is_floating(DataType dtype) {
  return dtype == DataType::Float16 || dtype == DataType::Float32 || dtype == DataType::Float64;
}
bool is_signed_integer(DataType dtype) {
  return dtype == DataType::Int8 || dtype == DataType::Int16 || dtype == DataType::Int32 ||
         dtype == DataType::Int64;
}

DataType parse_data_type(std::string_view text) {
  constexpr std::string_view prefix = "DML_TENSOR_DATA_TYPE_";
  if (text.substr(0, prefix.size()) == prefix) text.remove_prefix(prefix.size());
  for (const auto& entry : kInfo) {
    if (text == entry.name || text == entry.dml_name) return entry.dtype;
  }
  fail<DTypeError>("unknown data type '", text,
                   "'; expected one of float32, float16, float64, uint8, uint16, uint32, uint64, "
                   "int8, int16, int32, int64 (or the DirectML names FLOAT32, ...)");
}

Scalar Scalar::exact(DataType dtype, Number value, std::string_view context) {
  auto reject = [&](std::string_view why) -> Scalar {
    fail(context, " ", describe(value), " is not representable in ", name(dtype), ": ", why);
  };
  if (is_floating(dtype)) {
    // Each conversion below rounds once, straight from the given value: an integer goes to
    // float or double by one hardware conversion, a double to half by way of round-to-odd.
    const bool is_float = value.kind == Number::Kind::Float;
    const double v = is_float ? value.f
                     : value.kind == Number::Kind::Int ? static_cast<double>(value.i)
                                                       : static_cast<double>(value.u);
    if (dtype == DataType::Float64) return {dtype, to_bits(v)};
    if (dtype == DataType::Float32) {
      const float f = is_float ? static_cast<float>(value.f)
                      : value.kind == Number::Kind::Int ? static_cast<float>(value.i)
                                                        : static_cast<float>(value.u);
      if (std::isfinite(v) && !std::isfinite(f)) reject("it overflows to infinity");
      return {dtype, to_bits(f)};
    }
    if (std::isnan(v)) {
      // A NaN keeps its sign and the top 10 bits of its payload, signalling or not (a FLOAT16
      // given as raw bits, read back as a double, is exact that way); a payload with none of
      // those bits set becomes the quiet NaN, not infinity.
      const std::uint64_t d = to_bits(v);
      std::uint16_t h = static_cast<std::uint16_t>(((d >> 48) & 0x8000u) | 0x7c00u | ((d >> 42) & 0x3ffu));
      if ((h & 0x3ffu) == 0) h |= 0x200u;
      return {dtype, h};
    }
    // Integers that fit in half are exact in double, so v is exact wherever it matters.
    const std::uint16_t h = float_to_half_bits(round_to_odd_float(v));
    if (std::isfinite(v) && (h & 0x7c00u) == 0x7c00u) reject("it overflows to infinity");
    return {dtype, h};
  }
  return visit_dtype(dtype, [&](auto tag) -> Scalar {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      using Lim = std::numeric_limits<T>;
      const auto range = "range " + std::to_string(Lim::min()) + ".." + std::to_string(Lim::max());
      switch (value.kind) {
        case Number::Kind::Int:
          if (value.i < 0 ? (!Lim::is_signed || value.i < static_cast<std::int64_t>(Lim::min()))
                          : static_cast<std::uint64_t>(value.i) > static_cast<std::uint64_t>(Lim::max()))
            reject(range);
          return {dtype, to_bits(static_cast<T>(value.i))};
        case Number::Kind::UInt:
          if (value.u > static_cast<std::uint64_t>(Lim::max())) reject(range);
          return {dtype, to_bits(static_cast<T>(value.u))};
        case Number::Kind::Float: {
          const double f = value.f;
          if (!std::isfinite(f) || std::trunc(f) != f) reject("not an integer");
          // Compare in double: both bounds below are exact powers of two or small integers.
          const double lo = static_cast<double>(Lim::min());
          const double hi_exclusive = std::ldexp(1.0, Lim::digits);
          if (f < lo || f >= hi_exclusive) reject(range);
          return {dtype, to_bits(static_cast<T>(f))};
        }
      }
    }
    return reject("unsupported");
  });
}

Scalar Scalar::saturating(DataType dtype, float value) {
  return visit_dtype(dtype, [&](auto tag) -> Scalar {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, Half>) {
      return {dtype, float_to_half_bits(value)};
    } else if constexpr (std::is_floating_point_v<T>) {
      return {dtype, to_bits(static_cast<T>(value))};
    } else {
      using Lim = std::numeric_limits<T>;
      if (std::isnan(value)) return {dtype, 0};
      const double t = std::trunc(static_cast<double>(value));
      if (t <= static_cast<double>(Lim::min())) return {dtype, to_bits(Lim::min())};
      if (t >= std::ldexp(1.0, Lim::digits)) return {dtype, to_bits(Lim::max())};
      return {dtype, to_bits(static_cast<T>(t))};
    }
  });
}

double Scalar::to_double() const {
  return visit_dtype(dtype, [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, Half>) {
      return half_bits_to_float(static_cast<std::uint16_t>(bits));
    } else {
      T v;
      std::memcpy(&v, &bits, sizeof(T));
      return static_cast<double>(v);
    }
  });
}

}  // namespace dmlops
