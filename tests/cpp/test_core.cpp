// Core library tests: DataType and Scalar, Half conversions, Dims and TensorDesc helpers,
// TensorView overlap checks, StridedLayout / NdCounter, parallel_for and separable_gather.
// Oracles are written here from the spec and IEEE 754, never by calling the function under test.
#include <gtest/gtest.h>

#if !defined(_WIN32)
#include <sys/wait.h>
#include <unistd.h>
#endif
#if defined(__linux__)
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dmlops/core/activation.hpp"
#include "dmlops/core/checked.hpp"
#include "dmlops/core/cpu.hpp"
#include "dmlops/core/platform.hpp"
#include "dmlops/core/dims.hpp"
#include "dmlops/core/direct.hpp"
#include "dmlops/core/dtype.hpp"
#include "dmlops/core/plan.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/filter.hpp"
#include "dmlops/core/gemm.hpp"
#include "dmlops/core/scratch.hpp"
#include "dmlops/core/gather.hpp"
#include "dmlops/core/half.hpp"
#include "dmlops/core/lanes.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/core/rows.hpp"
#include "dmlops/core/strided.hpp"
#include "dmlops/core/tensor.hpp"
#include "dmlops/core/window.hpp"
#include "test_support.hpp"

namespace dmlops {
namespace {

using testing::float_at;
using testing::message_of;
using testing::store_float;

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
std::uint64_t bits_of(double d) {
  std::uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

std::string hex(std::uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// Byte strides from element strides.
TensorView make_view(DataType dtype, const Dims& sizes, const Dims& elem_strides, const void* data) {
  TensorView v{dtype, sizes, elem_strides, const_cast<void*>(data)};
  for (std::int64_t& s : v.byte_strides) s *= static_cast<std::int64_t>(element_size(dtype));
  return v;
}

// ---------------------------------------------------------------------------------------------
// DataType

struct DTypeRow {
  DataType dtype;
  int dml_value;  // DML_TENSOR_DATA_TYPE numbering
  std::size_t size;
  const char* name;
  const char* dml_name;
  bool floating;
  bool signed_integer;
};

constexpr DTypeRow kDTypeTable[] = {
    {DataType::Float32, 1, 4, "float32", "FLOAT32", true, false},
    {DataType::Float16, 2, 2, "float16", "FLOAT16", true, false},
    {DataType::UInt32, 3, 4, "uint32", "UINT32", false, false},
    {DataType::UInt16, 4, 2, "uint16", "UINT16", false, false},
    {DataType::UInt8, 5, 1, "uint8", "UINT8", false, false},
    {DataType::Int32, 6, 4, "int32", "INT32", false, true},
    {DataType::Int16, 7, 2, "int16", "INT16", false, true},
    {DataType::Int8, 8, 1, "int8", "INT8", false, true},
    {DataType::Float64, 9, 8, "float64", "FLOAT64", true, false},
    {DataType::UInt64, 10, 8, "uint64", "UINT64", false, false},
    {DataType::Int64, 11, 8, "int64", "INT64", false, true},
};

TEST(DataType, TableMatchesDirectML) {
  for (const DTypeRow& row : kDTypeTable) {
    SCOPED_TRACE(row.name);
    EXPECT_EQ(static_cast<int>(row.dtype), row.dml_value);
    EXPECT_EQ(element_size(row.dtype), row.size);
    EXPECT_EQ(name(row.dtype), row.name);
    EXPECT_EQ(dml_name(row.dtype), row.dml_name);
    EXPECT_EQ(is_floating(row.dtype), row.floating);
    EXPECT_EQ(is_signed_integer(row.dtype), row.signed_integer);
  }
}

TEST(DataType, AllDataTypesListsEachOnce) {
  std::set<int> seen;
  for (DataType d : kAllDataTypes) seen.insert(static_cast<int>(d));
  EXPECT_EQ(seen.size(), std::size(kDTypeTable));
  EXPECT_EQ(std::size(kAllDataTypes), std::size(kDTypeTable));
}

TEST(DataType, NamesRoundTrip) {
  for (DataType d : kAllDataTypes) {
    SCOPED_TRACE(name(d));
    EXPECT_EQ(parse_data_type(name(d)), d);
    EXPECT_EQ(parse_data_type(dml_name(d)), d);
    EXPECT_EQ(parse_data_type("DML_TENSOR_DATA_TYPE_" + std::string(dml_name(d))), d);
  }
}

TEST(DataType, UnknownNamesThrowDTypeError) {
  for (const char* bad : {"", "float", "float128", "bool", "DML_TENSOR_DATA_TYPE_", "DML_TENSOR_DATA_TYPE_UNKNOWN",
                          "FLOAT32 ", "xfloat32"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(parse_data_type(bad), DTypeError);
  }
  EXPECT_NE(message_of<DTypeError>([] { parse_data_type("float128"); }).find("float128"), std::string::npos);
}

TEST(DataType, OutOfRangeEnumThrowsDTypeError) {
  EXPECT_THROW(element_size(static_cast<DataType>(0)), DTypeError);
  EXPECT_THROW(name(static_cast<DataType>(12)), DTypeError);
}

// ---------------------------------------------------------------------------------------------
// Scalar

Scalar exact(DataType d, Number n) { return Scalar::exact(d, n, "padding_value"); }

TEST(ScalarExact, IntegerRanges) {
  EXPECT_EQ(exact(DataType::UInt8, Number::from_int(255)).bits, 255u);
  EXPECT_THROW(exact(DataType::UInt8, Number::from_int(256)), InvalidArgument);
  EXPECT_THROW(exact(DataType::UInt8, Number::from_int(300)), InvalidArgument);
  EXPECT_THROW(exact(DataType::UInt8, Number::from_int(-1)), InvalidArgument);
  EXPECT_EQ(exact(DataType::Int8, Number::from_int(-128)).bits & 0xffu, 0x80u);
  EXPECT_EQ(exact(DataType::Int8, Number::from_int(127)).bits & 0xffu, 0x7fu);
  EXPECT_THROW(exact(DataType::Int8, Number::from_int(128)), InvalidArgument);
  EXPECT_THROW(exact(DataType::Int8, Number::from_int(-129)), InvalidArgument);
  EXPECT_EQ(exact(DataType::Int16, Number::from_int(-2)).bits & 0xffffu, 0xfffeu);
  EXPECT_THROW(exact(DataType::UInt16, Number::from_int(65536)), InvalidArgument);
  EXPECT_THROW(exact(DataType::UInt32, Number::from_int(-1)), InvalidArgument);
  EXPECT_EQ(exact(DataType::UInt32, Number::from_int(4294967295)).bits & 0xffffffffu, 0xffffffffu);
  EXPECT_THROW(exact(DataType::UInt32, Number::from_int(4294967296)), InvalidArgument);
  EXPECT_THROW(exact(DataType::Int32, Number::from_int(2147483648)), InvalidArgument);
  EXPECT_THROW(exact(DataType::UInt64, Number::from_int(-1)), InvalidArgument);
}

TEST(ScalarExact, SixtyFourBitExtremesAreExact) {
  constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  constexpr auto kUMax = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(exact(DataType::Int64, Number::from_int(kMin)).bits, 0x8000000000000000u);
  EXPECT_EQ(exact(DataType::Int64, Number::from_int(kMax)).bits, 0x7fffffffffffffffu);
  EXPECT_EQ(exact(DataType::UInt64, Number::from_uint(kUMax)).bits, kUMax);
  EXPECT_EQ(exact(DataType::UInt64, Number::from_int(kMax)).bits, static_cast<std::uint64_t>(kMax));
  EXPECT_THROW(exact(DataType::Int64, Number::from_uint(kUMax)), InvalidArgument);
  EXPECT_THROW(exact(DataType::Int64, Number::from_uint(std::uint64_t{1} << 63)), InvalidArgument);
  EXPECT_THROW(exact(DataType::UInt32, Number::from_uint(kUMax)), InvalidArgument);
  // Odd values next to the extremes would be lost by any detour through double.
  EXPECT_EQ(exact(DataType::Int64, Number::from_int(kMax - 2)).bits, static_cast<std::uint64_t>(kMax - 2));
  EXPECT_EQ(exact(DataType::UInt64, Number::from_uint(kUMax - 2)).bits, kUMax - 2);
}

TEST(ScalarExact, FloatsIntoIntegers) {
  EXPECT_THROW(exact(DataType::Int32, Number::from_float(0.5)), InvalidArgument);
  EXPECT_THROW(exact(DataType::Int32, Number::from_float(-2.25)), InvalidArgument);
  EXPECT_EQ(exact(DataType::Int32, Number::from_float(3.0)).bits & 0xffffffffu, 3u);
  EXPECT_EQ(exact(DataType::Int32, Number::from_float(-3.0)).bits & 0xffffffffu, 0xfffffffdu);
  EXPECT_THROW(exact(DataType::Int32, Number::from_float(std::nan(""))), InvalidArgument);
  EXPECT_THROW(exact(DataType::Int32, Number::from_float(INFINITY)), InvalidArgument);
  EXPECT_THROW(exact(DataType::UInt8, Number::from_float(256.0)), InvalidArgument);
  EXPECT_THROW(exact(DataType::UInt8, Number::from_float(-1.0)), InvalidArgument);
  // 2^63 is just out of int64's range; -2^63 is in it.
  EXPECT_THROW(exact(DataType::Int64, Number::from_float(std::ldexp(1.0, 63))), InvalidArgument);
  EXPECT_EQ(exact(DataType::Int64, Number::from_float(-std::ldexp(1.0, 63))).bits, 0x8000000000000000u);
  EXPECT_THROW(exact(DataType::UInt64, Number::from_float(std::ldexp(1.0, 64))), InvalidArgument);
  const double below_2_64 = std::nextafter(std::ldexp(1.0, 64), 0.0);
  EXPECT_EQ(exact(DataType::UInt64, Number::from_float(below_2_64)).bits, static_cast<std::uint64_t>(below_2_64));
}

TEST(ScalarExact, MessageNamesContextValueAndDtype) {
  const std::string m = message_of<InvalidArgument>([] { exact(DataType::UInt8, Number::from_int(300)); });
  EXPECT_NE(m.find("padding_value"), std::string::npos) << m;
  EXPECT_NE(m.find("300"), std::string::npos) << m;
  EXPECT_NE(m.find("uint8"), std::string::npos) << m;
}

TEST(ScalarExact, Float32) {
  EXPECT_EQ(exact(DataType::Float32, Number::from_float(1.5)).bits, bits_of(1.5f));
  EXPECT_EQ(exact(DataType::Float32, Number::from_int(9)).bits, bits_of(9.0f));
  EXPECT_THROW(exact(DataType::Float32, Number::from_float(1e39)), InvalidArgument);
  EXPECT_THROW(exact(DataType::Float32, Number::from_float(-1e39)), InvalidArgument);
  EXPECT_EQ(exact(DataType::Float32, Number::from_float(INFINITY)).bits, 0x7f800000u);
  EXPECT_TRUE(std::isnan(float_of(static_cast<std::uint32_t>(exact(DataType::Float32, Number::from_float(NAN)).bits))));
  // 0.1 is not a float: rounded to nearest, not rejected.
  EXPECT_EQ(exact(DataType::Float32, Number::from_float(0.1)).bits, bits_of(0.1f));
  EXPECT_EQ(exact(DataType::Float64, Number::from_float(0.1)).bits, bits_of(0.1));
}

TEST(ScalarExact, IntegersIntoFloat32RoundOnce) {
  // 2^60 + 2^36 + 1 lies just above the midpoint between the floats 2^60 and 2^60 + 2^37, so it
  // rounds up. Converting through double first loses the +1 and lands exactly on the midpoint,
  // which ties-to-even then rounds down: the double rounding the "round to nearest" contract forbids.
  const std::int64_t i = (std::int64_t{1} << 60) + (std::int64_t{1} << 36) + 1;
  EXPECT_EQ(exact(DataType::Float32, Number::from_int(i)).bits, 0x5d800001u);
  EXPECT_EQ(exact(DataType::Float32, Number::from_int(-i)).bits, 0xdd800001u);
  const std::uint64_t u = (std::uint64_t{1} << 63) + (std::uint64_t{1} << 39) + 1;
  EXPECT_EQ(exact(DataType::Float32, Number::from_uint(u)).bits, 0x5f000001u);
}

TEST(ScalarExact, Float16) {
  EXPECT_EQ(exact(DataType::Float16, Number::from_float(1.0)).bits, 0x3c00u);
  EXPECT_EQ(exact(DataType::Float16, Number::from_float(INFINITY)).bits, 0x7c00u);
  EXPECT_EQ(exact(DataType::Float16, Number::from_float(-INFINITY)).bits, 0xfc00u);
  const auto nan_bits = exact(DataType::Float16, Number::from_float(NAN)).bits;
  EXPECT_EQ(nan_bits & 0x7c00u, 0x7c00u);
  EXPECT_NE(nan_bits & 0x03ffu, 0u);
  EXPECT_EQ(exact(DataType::Float16, Number::from_float(65504.0)).bits, 0x7bffu);
  EXPECT_EQ(exact(DataType::Float16, Number::from_int(65504)).bits, 0x7bffu);
  EXPECT_EQ(exact(DataType::Float16, Number::from_float(-65504.0)).bits, 0xfbffu);
  // 65520 is the midpoint to the next (unrepresentable) step: ties-to-even overflows.
  EXPECT_THROW(exact(DataType::Float16, Number::from_float(65520.0)), InvalidArgument);
  EXPECT_THROW(exact(DataType::Float16, Number::from_int(65520)), InvalidArgument);
  EXPECT_EQ(exact(DataType::Float16, Number::from_float(std::nextafter(65520.0, 0.0))).bits, 0x7bffu);
  EXPECT_THROW(exact(DataType::Float16, Number::from_float(1e39)), InvalidArgument);
}

TEST(ScalarExact, Float16IsRoundedOnceFromDouble) {
  const double ulp = std::ldexp(1.0, -10);  // half's ulp at 1
  // Just above the midpoint 1 + ulp/2 by far less than a float ulp: a double -> float -> half
  // path rounds to the midpoint first and then ties down to 1.0 (0x3c00).
  EXPECT_EQ(exact(DataType::Float16, Number::from_float(1.0 + ulp / 2 + std::ldexp(1.0, -40))).bits, 0x3c01u);
  EXPECT_EQ(exact(DataType::Float16, Number::from_float(1.0 + ulp / 2 - std::ldexp(1.0, -40))).bits, 0x3c00u);
  EXPECT_EQ(exact(DataType::Float16, Number::from_float(-(1.0 + ulp / 2 + std::ldexp(1.0, -40)))).bits, 0xbc01u);
  // Exact midpoints tie to even.
  EXPECT_EQ(exact(DataType::Float16, Number::from_float(1.0 + ulp / 2)).bits, 0x3c00u);
  EXPECT_EQ(exact(DataType::Float16, Number::from_float(1.0 + 3 * ulp / 2)).bits, 0x3c02u);
  // The same in the subnormal range (smallest subnormal 2^-24).
  EXPECT_EQ(exact(DataType::Float16, Number::from_float(std::ldexp(2.5, -24) + std::ldexp(1.0, -60))).bits, 0x0003u);
  EXPECT_EQ(exact(DataType::Float16, Number::from_float(std::ldexp(2.5, -24))).bits, 0x0002u);
  EXPECT_EQ(exact(DataType::Float16, Number::from_float(std::ldexp(0.5, -24) + std::ldexp(1.0, -70))).bits, 0x0001u);
}

TEST(ScalarSaturating, IntegersTruncateThenSaturate) {
  EXPECT_EQ(Scalar::saturating(DataType::Int8, 1e10f).bits & 0xffu, 0x7fu);
  EXPECT_EQ(Scalar::saturating(DataType::Int8, -1e10f).bits & 0xffu, 0x80u);
  EXPECT_EQ(Scalar::saturating(DataType::Int8, NAN).bits & 0xffu, 0u);
  EXPECT_EQ(Scalar::saturating(DataType::Int8, INFINITY).bits & 0xffu, 0x7fu);
  EXPECT_EQ(Scalar::saturating(DataType::Int8, -INFINITY).bits & 0xffu, 0x80u);
  EXPECT_EQ(Scalar::saturating(DataType::Int32, -3.7f).bits & 0xffffffffu, 0xfffffffdu);
  EXPECT_EQ(Scalar::saturating(DataType::Int32, 3.7f).bits & 0xffffffffu, 3u);
  EXPECT_EQ(Scalar::saturating(DataType::Int32, 1e10f).bits & 0xffffffffu, 0x7fffffffu);
  EXPECT_EQ(Scalar::saturating(DataType::UInt8, -3.7f).bits & 0xffu, 0u);
  EXPECT_EQ(Scalar::saturating(DataType::UInt8, -1e10f).bits & 0xffu, 0u);
  EXPECT_EQ(Scalar::saturating(DataType::UInt8, 255.9f).bits & 0xffu, 255u);
  EXPECT_EQ(Scalar::saturating(DataType::UInt8, 300.0f).bits & 0xffu, 255u);
  EXPECT_EQ(Scalar::saturating(DataType::UInt64, 1e30f).bits, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(Scalar::saturating(DataType::Int64, -1e30f).bits, 0x8000000000000000u);
  EXPECT_EQ(Scalar::saturating(DataType::Int64, 9.0f).bits, 9u);
}

TEST(ScalarSaturating, FloatsRoundToNearest) {
  EXPECT_EQ(Scalar::saturating(DataType::Float32, 9.5f).bits, bits_of(9.5f));
  EXPECT_EQ(Scalar::saturating(DataType::Float64, 0.1f).bits, bits_of(static_cast<double>(0.1f)));
  EXPECT_EQ(Scalar::saturating(DataType::Float16, 1.0f).bits, 0x3c00u);
  EXPECT_EQ(Scalar::saturating(DataType::Float16, 1e10f).bits, 0x7c00u);
  EXPECT_EQ(Scalar::saturating(DataType::Float16, 9.0f).to_double(), 9.0);
  EXPECT_EQ(Scalar::saturating(DataType::Float16, 9.0f).dtype, DataType::Float16);
}

// ---------------------------------------------------------------------------------------------
// Half

// Independent decoder: sign * 2^(e-15) * (1 + m/1024), subnormals m * 2^-24.
double decode_half(std::uint16_t h) {
  const double sign = (h & 0x8000u) ? -1.0 : 1.0;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1.0 + m / 1024.0, e - 15);
}
bool half_is_nan(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0; }

TEST(Half, DecodesEveryPattern) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float got = half_bits_to_float(static_cast<std::uint16_t>(h));
    const double want = decode_half(static_cast<std::uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << hex(h);
      ASSERT_EQ(std::signbit(got), (h & 0x8000u) != 0) << hex(h);
    } else {
      // Bits, so -0 and +0 are told apart.
      ASSERT_EQ(bits_of(got), bits_of(static_cast<float>(want))) << hex(h);
    }
  }
}

TEST(Half, EncodeOfDecodeIsIdentity) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto b = static_cast<std::uint16_t>(h);
    const std::uint16_t back = float_to_half_bits(half_bits_to_float(b));
    // NaNs come back quietened (bit 9 set) with sign and payload kept, as F16C does.
    const std::uint16_t want = half_is_nan(b) ? static_cast<std::uint16_t>(b | 0x0200u) : b;
    ASSERT_EQ(back, want) << hex(h);
  }
}

TEST(Half, MidpointsTieToEven) {
  for (std::uint16_t h = 0; h < 0x7bff; ++h) {
    const double lo = decode_half(h), hi = decode_half(static_cast<std::uint16_t>(h + 1));
    const double mid = (lo + hi) / 2;
    const float f = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(f), mid) << "midpoint not exact in float at " << hex(h);
    const std::uint16_t even = (h & 1u) ? static_cast<std::uint16_t>(h + 1) : h;
    ASSERT_EQ(float_to_half_bits(f), even) << hex(h);
    ASSERT_EQ(float_to_half_bits(-f), even | 0x8000u) << hex(h);
    ASSERT_EQ(float_to_half_bits(std::nextafter(f, 0.0f)), h) << hex(h);
    ASSERT_EQ(float_to_half_bits(std::nextafter(f, INFINITY)), h + 1) << hex(h);
  }
}

TEST(Half, OverflowUnderflowAndSpecials) {
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00u);  // midpoint 65504..65536 ties to "even" inf
  EXPECT_EQ(float_to_half_bits(std::nextafter(65520.0f, 0.0f)), 0x7bffu);
  EXPECT_EQ(float_to_half_bits(-65520.0f), 0xfc00u);
  EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::max()), 0x7c00u);
  EXPECT_EQ(float_to_half_bits(INFINITY), 0x7c00u);
  EXPECT_EQ(float_to_half_bits(-INFINITY), 0xfc00u);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000u);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(float_to_half_bits(-std::ldexp(1.0f, -25)), 0x8000u);
  EXPECT_EQ(float_to_half_bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001u);
  EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::denorm_min()), 0x0000u);
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000u);
  EXPECT_EQ(float_to_half_bits(float_of(0x7fc00123u)), 0x7e00u);  // payload's top 10 bits kept: 0
  EXPECT_EQ(float_to_half_bits(float_of(0xff802000u)), 0xfe01u);  // signalling: quietened, payload kept
  EXPECT_EQ(bits_of(half_bits_to_float(0x7c01u)), 0x7fc02000u);
  EXPECT_EQ(bits_of(half_bits_to_float(0xfe00u)), 0xffc00000u);
}

TEST(Half, BulkMatchesScalarOnEveryHalf) {
  std::vector<Half> all(65536);
  for (std::uint32_t h = 0; h < 65536; ++h) all[h].bits = static_cast<std::uint16_t>(h);
  std::vector<float> out(65536);
  half_to_float(all.data(), out.data(), all.size());
  for (std::uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(bits_of(out[h]), bits_of(half_bits_to_float(static_cast<std::uint16_t>(h)))) << hex(h);

  // And back: every float the decoder produces, through the bulk encoder.
  std::vector<Half> back(65536);
  float_to_half(out.data(), back.data(), out.size());
  for (std::uint32_t h = 0; h < 65536; ++h) ASSERT_EQ(back[h].bits, float_to_half_bits(out[h])) << hex(h);

  // Unaligned starts and counts that are not multiples of the 8-wide vector (the tail loop).
  for (std::size_t start : {1u, 3u, 7u}) {
    for (std::size_t count : {0u, 1u, 7u, 9u, 15u, 17u}) {
      std::vector<float> part(count + 1, -1.0f);
      half_to_float(all.data() + 0x3c00 + start, part.data(), count);
      for (std::size_t i = 0; i < count; ++i)
        ASSERT_EQ(bits_of(part[i]), bits_of(half_bits_to_float(static_cast<std::uint16_t>(0x3c00 + start + i))));
      EXPECT_EQ(part[count], -1.0f) << "wrote past count";
    }
  }
}

void expect_bulk_encode_matches_scalar(const std::vector<float>& src) {
  std::vector<Half> dst(src.size() + 1, Half{0xabcd});
  float_to_half(src.data(), dst.data(), src.size());
  for (std::size_t i = 0; i < src.size(); ++i) {
    const std::uint16_t want = float_to_half_bits(src[i]);
    if (half_is_nan(want) || half_is_nan(dst[i].bits)) {
      ASSERT_TRUE(half_is_nan(want) && half_is_nan(dst[i].bits)) << hex(bits_of(src[i]));
    } else {
      ASSERT_EQ(dst[i].bits, want) << "float bits " << hex(bits_of(src[i]));
    }
  }
  EXPECT_EQ(dst[src.size()].bits, 0xabcdu) << "wrote past count";
}

TEST(Half, BulkEncodeMatchesScalarOnRandomFloats) {
  const std::uint32_t seed = 20240611;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  // Uniform over all bit patterns (about 1/256 of them NaN); an odd count to reach the tail loop.
  std::vector<float> any(1'000'003);
  for (float& f : any) f = float_of(static_cast<std::uint32_t>(rng()));
  expect_bulk_encode_matches_scalar(any);
  // Concentrated on the floats that land on or near finite halves (exponents 2^-26 .. 2^17),
  // where all the rounding happens.
  std::uniform_int_distribution<std::uint32_t> near(0x32800000u, 0x48000000u);
  std::vector<float> dense(1'000'001);
  for (float& f : dense) f = float_of(near(rng) | (rng() & 0x80000000u));
  expect_bulk_encode_matches_scalar(dense);
}

TEST(Cpu, Avx2SwitchFollowsEnvironment) {
  const char* env = std::getenv("DMLOPS_DISABLE_AVX2");
  const bool disabled = env != nullptr && env[0] != '\0' && env[0] != '0';
  EXPECT_EQ(avx2_enabled(), testing::cpu_supports("avx2") && !disabled);
}

TEST(Platform, CpuFeaturesMatchTheCompilersDetection) {
  const platform::CpuFeatures& f = platform::cpu_features();
  EXPECT_EQ(f.avx, testing::cpu_supports("avx"));
  EXPECT_EQ(f.avx2, testing::cpu_supports("avx2"));
  EXPECT_EQ(f.fma, testing::cpu_supports("fma"));
  EXPECT_EQ(f.f16c, testing::cpu_supports("f16c") && testing::cpu_supports("avx"));
  EXPECT_EQ(f.avx512f, testing::cpu_supports("avx512f"));
  EXPECT_EQ(f.neon, DMLOPS_ARM64 == 1);
}

// Half-rate AVX-512 (one zmm FMA per cycle) is AMD family 19h with AVX-512 (Zen 4), an L2 that
// feeds the AVX-512 tiles AMD family 19h or later with AVX-512 (Zen 4, Zen 5), as /proc/cpuinfo
// names the vendor and family; vector_fmas_per_cycle() follows the first.
TEST(Platform, HalfRateAvx512IsZen4AsProcCpuinfoSaysIt) {
  const platform::CpuFeatures& f = platform::cpu_features();
  EXPECT_FALSE(f.avx512_half_rate && !f.avx512f);
  EXPECT_FALSE(f.avx512_half_rate && !f.avx512_l2_fed);
  EXPECT_EQ(vector_fmas_per_cycle(), avx512_enabled() && f.avx512_half_rate ? 1 : 2);
#if defined(__linux__) && DMLOPS_X86
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, vendor;
  int family = -1;
  while (std::getline(cpuinfo, line) && (vendor.empty() || family < 0)) {
    const auto value = [&] { return line.substr(line.find(':') + 2); };
    if (line.rfind("vendor_id", 0) == 0) vendor = value();
    if (line.rfind("cpu family", 0) == 0) family = std::stoi(value());
  }
  ASSERT_FALSE(vendor.empty());
  EXPECT_EQ(f.avx512_half_rate, f.avx512f && vendor == "AuthenticAMD" && family == 25) << vendor << " family " << family;
  EXPECT_EQ(f.zen4, f.avx512f && vendor == "AuthenticAMD" && family == 25) << vendor << " family " << family;
  EXPECT_EQ(f.avx512_l2_fed, f.avx512f && vendor == "AuthenticAMD" && family >= 25) << vendor << " family " << family;
#endif
}

TEST(Platform, UsableCpusAreBetweenOneAndTheMachines) {
  const int cpus = platform::usable_cpu_count();
  EXPECT_GE(cpus, 1);
  if (std::thread::hardware_concurrency() > 0) {
    EXPECT_LE(cpus, static_cast<int>(std::thread::hardware_concurrency()));
  }
}

#if defined(__linux__)
namespace {
cpu_set_t affinity_of_this_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  return set;
}
// The scheduling attributes the kernel reports for this thread (struct sched_attr, first 48 bytes).
struct SchedAttr {
  std::uint32_t size, policy;
  std::uint64_t flags;
  std::int32_t nice;
  std::uint32_t priority;
  std::uint64_t runtime, deadline, period;
};
SchedAttr sched_attr_of_this_thread() {
  SchedAttr attr{};
  EXPECT_EQ(syscall(SYS_sched_getattr, 0, &attr, sizeof(attr), 0), 0);
  return attr;
}
}  // namespace

TEST(Platform, KeepOffCpuLeavesItUntilAskedToAllowItAgain) {
  std::thread([] {
    const cpu_set_t before = affinity_of_this_thread();
    const int cpu = platform::current_cpu();
    ASSERT_GE(cpu, 0);
    ASSERT_TRUE(CPU_ISSET(cpu, &before));
    const int kept_off = platform::keep_off_cpu(cpu, -1);
    EXPECT_EQ(kept_off, CPU_COUNT(&before) > 1 ? cpu : -1);
    cpu_set_t expected = before;
    if (kept_off >= 0) {
      CPU_CLR(cpu, &expected);
      EXPECT_NE(platform::current_cpu(), cpu);
    }
    cpu_set_t now = affinity_of_this_thread();
    EXPECT_TRUE(CPU_EQUAL(&expected, &now));
    EXPECT_EQ(platform::keep_off_cpu(-1, kept_off), -1);  // allowed again: the mask it had
    now = affinity_of_this_thread();
    EXPECT_TRUE(CPU_EQUAL(&before, &now));
    EXPECT_EQ(platform::keep_off_cpu(CPU_SETSIZE, -1), -1);  // no such CPU: nothing left out
    now = affinity_of_this_thread();
    EXPECT_TRUE(CPU_EQUAL(&before, &now));
  }).join();
}

TEST(Platform, ShortTimeSlicesComeAndGoAndKeepThePolicyAndNiceValue) {
  std::thread([] {
    ASSERT_EQ(setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 3), 0);
    const SchedAttr before = sched_attr_of_this_thread();
    platform::set_short_time_slices(true);
    const SchedAttr short_slices = sched_attr_of_this_thread();
    platform::set_short_time_slices(false);
    const SchedAttr after = sched_attr_of_this_thread();
    for (const SchedAttr& attr : {short_slices, after}) {
      EXPECT_EQ(attr.policy, before.policy);
      EXPECT_EQ(attr.nice, 3);
    }
    // Kernels with custom slices (6.12 and later) report the slice as the runtime.
    if (before.runtime != 0) {
      EXPECT_EQ(short_slices.runtime, 100'000u);
      EXPECT_EQ(after.runtime, before.runtime);
    }
  }).join();
}
#endif

// Plausible sizes whatever the source; on Linux, where the kernel publishes its own reading of
// the caches in sysfs, the same sizes as there (read here independently of the library).
TEST(Platform, CacheSizesArePlausibleAndAgreeWithSysfs) {
  const platform::CacheSizes& c = platform::cache_sizes();
  EXPECT_GE(c.l1d, 4 * 1024);
  EXPECT_LE(c.l1d, 1 << 20);
  EXPECT_GE(c.l2, c.l1d);
  EXPECT_LE(c.l2, std::int64_t{256} << 20);
  EXPECT_GT(c.l3, 0);
  const std::string source = c.source;
  if (source == "environment") {  // DMLOPS_CACHE_SIZES replaced the detection: its values exactly
    const char* env = std::getenv("DMLOPS_CACHE_SIZES");
    ASSERT_NE(env, nullptr);
    const auto parsed = platform::parse_cache_sizes(env);
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(c.l1d, parsed->l1d);
    EXPECT_EQ(c.l2, parsed->l2);
    EXPECT_EQ(c.l3, parsed->l3);
    return;
  }
  EXPECT_TRUE(source == "cpuid" || source == "sysfs" || source == "sysctl" || source == "windows" || source == "default")
      << source;
#if defined(__linux__)
  std::map<int, std::int64_t> sysfs;  // level -> bytes of the data or unified cache
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size)) break;
    if (type == "Instruction") continue;
    const std::int64_t kib = std::stoll(size.substr(0, size.size() - 1));
    sysfs[level] = size.back() == 'M' ? kib << 20 : kib << 10;
  }
  if (sysfs.count(1)) {
    EXPECT_EQ(c.l1d, sysfs[1]);
  }
  if (sysfs.count(2)) {
    EXPECT_EQ(c.l2, sysfs[2]);
  }
  if (!sysfs.empty()) {
    EXPECT_NE(source, "default");
  }
#endif
}

TEST(Platform, CacheSizesParser) {
  const auto sizes = platform::parse_cache_sizes(" 48K, 2M ,32768k");
  ASSERT_TRUE(sizes.has_value());
  EXPECT_EQ(sizes->l1d, 48 * 1024);
  EXPECT_EQ(sizes->l2, 2 << 20);
  EXPECT_EQ(sizes->l3, 32 << 20);
  EXPECT_EQ(std::string(sizes->source), "environment");
  EXPECT_EQ(platform::parse_cache_sizes("32768,1048576,8M")->l2, 1 << 20);
  for (const char* bad : {"", "48K", "48K,2M", "48K,2M,32M,", "48K,2M,32M,1M", "2M,48K,32M", "512,1M,8M", "2048M,4096M,8192M",
                          "48KB,2M,32M", "-48K,2M,32M", "48K;2M;32M", "999999999K,1M,1M", "0x10K,1M,8M"}) {
    EXPECT_FALSE(platform::parse_cache_sizes(bad).has_value()) << bad;
  }
}

#if defined(__linux__)
// The VmFlags of the mapping that holds `address` (/proc/self/smaps), empty if none.
std::string vm_flags_of(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-' && line.find(':') > line.find(' ')) {
      inside = begin <= at && at < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return {};
}

// Whether madvise(MADV_HUGEPAGE) shows in this process's smaps at all: not on kernels without
// transparent huge pages, nor under qemu's user-mode emulation (the Arm64 stage), which does
// not pass the advice on.
bool huge_page_advice_shows() {
  const std::size_t bytes = platform::kHugePageMinBytes;
  void* block = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (block == MAP_FAILED) return false;
  const bool shows = madvise(block, bytes, MADV_HUGEPAGE) == 0 &&
                     (vm_flags_of(static_cast<char*>(block) + bytes / 2) + " ").find(" hg ") != std::string::npos;
  munmap(block, bytes);
  return shows;
}
#endif

// Buffers that kernels stream with vector loads: a VectorAllocator's blocks start on a cache line
// and keep their values at every size, and (Linux, where a direct madvise shows in smaps) large
// ones, and large scratch blocks, are in a mapping advised huge pages; null, empty and small
// blocks are left alone.
TEST(Platform, LargeBuffersAreAlignedAndAdvisedHugePages) {
#if defined(__linux__)
  const bool advice_shows = huge_page_advice_shows();
#endif
  platform::advise_huge_pages(nullptr, std::size_t{1} << 30);
  platform::advise_huge_pages(&errno, 0);
  for (const std::size_t n : {std::size_t{1}, std::size_t{15}, std::size_t{1000}, platform::kHugePageMinBytes / 4 - 1,
                              platform::kHugePageMinBytes / 4, (std::size_t{3} << 20) + 5}) {
    std::vector<float, platform::VectorAllocator<float>> values(n);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(values.data()) % 64, 0u) << n;
    for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i % 1000003);
    platform::advise_huge_pages(values.data(), n * sizeof(float));  // again: harmless
    for (std::size_t i = 0; i < n; i += 1 + n / 97) ASSERT_EQ(values[i], static_cast<float>(i % 1000003)) << n << " " << i;
    EXPECT_EQ(values[n - 1], static_cast<float>((n - 1) % 1000003));
#if defined(__linux__)
    if (n * sizeof(float) >= platform::kHugePageMinBytes && advice_shows) {
      const std::string flags = vm_flags_of(values.data() + n / 2);
      EXPECT_NE((flags + " ").find(" hg "), std::string::npos) << n << ": " << flags;
    }
#endif
  }
#if defined(__linux__)
  if (advice_shows) {
    const Scratch<float> block(static_cast<std::int64_t>(platform::kHugePageMinBytes));  // 16 MiB
    const std::string flags = vm_flags_of(block.get() + platform::kHugePageMinBytes / 2);
    EXPECT_NE((flags + " ").find(" hg "), std::string::npos) << flags;
  }
#endif
}

#if defined(__SIZEOF_INT128__)  // GCC and Clang on 64-bit targets: the exact reference
__extension__ typedef __int128 Int128;

// The portable overflow checks (the MSVC path) against exact 128-bit arithmetic, and the
// compiler's checks (the GCC and Clang path) against them.
TEST(Platform, OverflowChecksAreExact) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max(), kMin = std::numeric_limits<std::int64_t>::min();
  std::vector<std::int64_t> values = {0, 1, -1, 2, -2, 3, 7, -7, kMax, kMin, kMax - 1, kMin + 1, kMax / 2, kMin / 2,
                                      kMax / 2 + 1, kMin / 2 - 1, 3037000499, 3037000500, -3037000499, -3037000500,
                                      std::int64_t{1} << 32, -(std::int64_t{1} << 32), std::int64_t{1} << 62};
  std::uint64_t state = 5;
  for (int i = 0; i < 200; ++i) values.push_back(static_cast<std::int64_t>(testing::splitmix64(state) >> (i % 64)));
  for (std::int64_t a : values) {
    for (std::int64_t b : values) {
      const Int128 product = static_cast<Int128>(a) * b, sum = static_cast<Int128>(a) + b;
      const bool mul_over = product > kMax || product < kMin, add_over = sum > kMax || sum < kMin;
      std::int64_t r = 0, q = 0;
      EXPECT_EQ(platform::mul_overflow_portable(a, b, &r), mul_over) << a << " * " << b;
      EXPECT_EQ(platform::mul_overflow(a, b, &q), mul_over) << a << " * " << b;
      if (!mul_over) {
        EXPECT_EQ(r, static_cast<std::int64_t>(product)) << a << " * " << b;
        EXPECT_EQ(q, r);
      }
      EXPECT_EQ(platform::add_overflow_portable(a, b, &r), add_over) << a << " + " << b;
      EXPECT_EQ(platform::add_overflow(a, b, &q), add_over) << a << " + " << b;
      if (!add_over) {
        EXPECT_EQ(r, static_cast<std::int64_t>(sum)) << a << " + " << b;
        EXPECT_EQ(q, r);
      }
    }
  }
}
#endif

// A loop body for IsaKernel: products, a sum, a square root and a division, over specials too.
template <class A>
DMLOPS_ALWAYS_INLINE inline void isa_test_body(const A* x, const A* y, A* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = std::sqrt(std::abs(x[i] * y[i] + x[i])) / (y[i] - A(0.5));
}

template <class A, class Bits>
void expect_isa_kernel_matches_the_body() {
  std::uint64_t state = 11;
  std::vector<A> x(1003), y(1003), direct(1003), dispatched(1003);
  for (std::size_t i = 0; i < x.size(); ++i) {  // random bit patterns: NaN, inf, subnormals, every exponent
    const Bits a = static_cast<Bits>(testing::splitmix64(state)), b = static_cast<Bits>(testing::splitmix64(state));
    std::memcpy(&x[i], &a, sizeof(A));
    std::memcpy(&y[i], &b, sizeof(A));
  }
  for (std::int64_t n : {0, 1, 7, 8, 9, 1003}) {
    isa_test_body(x.data(), y.data(), direct.data(), n);
    IsaKernel<&isa_test_body<A>>::run(x.data(), y.data(), dispatched.data(), n);
    EXPECT_EQ(std::memcmp(direct.data(), dispatched.data(), static_cast<std::size_t>(n) * sizeof(A)), 0) << "n " << n;
  }
}

TEST(Cpu, IsaKernelGivesTheBodysBits) {
  // The AVX2 copy here unless DMLOPS_DISABLE_AVX2 is set (CTest runs both): the same bits as
  // the body compiled for the baseline.
  expect_isa_kernel_matches_the_body<float, std::uint32_t>();
  expect_isa_kernel_matches_the_body<double, std::uint64_t>();
}

TEST(Half, F16cSwitchFollowsEnvironment) {
  const char* env = std::getenv("DMLOPS_DISABLE_F16C");
  const bool disabled = env != nullptr && env[0] != '\0' && env[0] != '0';
  const bool cpu = testing::cpu_supports("f16c") && testing::cpu_supports("avx");
  EXPECT_EQ(f16c_enabled(), cpu && !disabled);
}

// ---------------------------------------------------------------------------------------------
// Dims, packed_strides, calc_buffer_tensor_size, validate_tensor_desc

TEST(Dims, Basics) {
  Dims d{2, 3, 4};
  EXPECT_EQ(d.size(), 3);
  EXPECT_EQ(d.product(), 24);
  EXPECT_EQ(d.back(), 4);
  EXPECT_EQ(Dims{}.product(), 1);
  EXPECT_TRUE(Dims{}.empty());
  EXPECT_EQ(Dims::filled(3, 7), (Dims{7, 7, 7}));
  d.erase(1);
  EXPECT_EQ(d, (Dims{2, 4}));
  EXPECT_NE(d, (Dims{2, 4, 1}));
  std::vector<int> v{5, 6};
  EXPECT_EQ(Dims(v.begin(), v.end()), (Dims{5, 6}));
  std::ostringstream s;
  s << Dims{1, -2};
  EXPECT_EQ(s.str(), "(1, -2)");  // as Python prints a tuple
  s.str("");
  s << Dims{4};
  EXPECT_EQ(s.str(), "(4,)");
}

TEST(Dims, AtMostEightEntries) {
  Dims d = Dims::filled(kMaxRank, 1);
  EXPECT_THROW(d.push_back(1), InvalidArgument);
  EXPECT_EQ(d.size(), kMaxRank);
  EXPECT_THROW((Dims{1, 2, 3, 4, 5, 6, 7, 8, 9}), InvalidArgument);
}

TEST(PackedStrides, RowMajor) {
  EXPECT_EQ(packed_strides({2, 3, 4}), (Dims{12, 4, 1}));
  EXPECT_EQ(packed_strides({5}), (Dims{1}));
  EXPECT_EQ(packed_strides({1, 1, 7, 1}), (Dims{7, 7, 1, 1}));
}

TEST(CalcBufferTensorSize, PackedRoundsUpToFour) {
  EXPECT_EQ(calc_buffer_tensor_size(DataType::Float16, {1, 3}), 8u);  // the spec's example: 6 -> 8
  EXPECT_EQ(calc_buffer_tensor_size(DataType::Float32, {2, 3}), 24u);
  EXPECT_EQ(calc_buffer_tensor_size(DataType::UInt8, {5}), 8u);
  EXPECT_EQ(calc_buffer_tensor_size(DataType::UInt8, {4}), 4u);
  EXPECT_EQ(calc_buffer_tensor_size(DataType::Int8, {1}), 4u);
  EXPECT_EQ(calc_buffer_tensor_size(DataType::Float64, {3}), 24u);
  // 64-bit arithmetic: 2^33 bytes.
  EXPECT_EQ(calc_buffer_tensor_size(DataType::UInt8, {65536, 65536, 2}), std::uint64_t{1} << 33);
}

TEST(CalcBufferTensorSize, Strided) {
  // (sum (size-1)*stride + 1) elements: (1*8 + 2*2 + 1) * 4 bytes = 52.
  EXPECT_EQ(calc_buffer_tensor_size(DataType::Float32, {2, 3}, Dims{8, 2}), 52u);
  EXPECT_EQ(calc_buffer_tensor_size(DataType::Float32, {2, 3}, Dims{-8, 2}), 52u);
  EXPECT_EQ(calc_buffer_tensor_size(DataType::Float32, {2, 3}, Dims{-8, -2}), 52u);
  // Packed strides give the packed size; (1*3 + 2*1 + 1) * 2 = 12.
  EXPECT_EQ(calc_buffer_tensor_size(DataType::Float16, {2, 3}, Dims{3, 1}), 12u);
  // Transposed strides span the same elements.
  EXPECT_EQ(calc_buffer_tensor_size(DataType::Float16, {3, 2}, Dims{1, 3}), 12u);
  // Broadcast: one element, rounded up to 4 bytes.
  EXPECT_EQ(calc_buffer_tensor_size(DataType::Float16, {4, 5}, Dims{0, 0}), 4u);
  // (2*1 + 1) * 1 byte = 3 -> 4
  EXPECT_EQ(calc_buffer_tensor_size(DataType::UInt8, {3}, Dims{1}), 4u);
  EXPECT_THROW(calc_buffer_tensor_size(DataType::UInt8, {3, 2}, Dims{1}), InvalidArgument);
}

TEST(ValidateTensorDesc, Rules) {
  EXPECT_NO_THROW(validate_tensor_desc({DataType::Float32, {1}, std::nullopt}, "t"));
  EXPECT_NO_THROW(validate_tensor_desc({DataType::Float32, {2, 3}, Dims{-3, 0}}, "t"));
  EXPECT_NO_THROW(validate_tensor_desc({DataType::Float32, Dims::filled(8, 1), std::nullopt}, "t"));

  const std::string rank0 =
      message_of<InvalidArgument>([] { validate_tensor_desc({DataType::Float32, {}, std::nullopt}, "Op: input"); });
  EXPECT_NE(rank0.find("Op: input"), std::string::npos) << rank0;
  const std::string size0 =
      message_of<InvalidArgument>([] { validate_tensor_desc({DataType::Float32, {2, 0}, std::nullopt}, "Op: input"); });
  EXPECT_NE(size0.find("sizes[1]"), std::string::npos) << size0;
  EXPECT_THROW(validate_tensor_desc({DataType::Float32, {2, -1}, std::nullopt}, "t"), InvalidArgument);
  EXPECT_THROW(validate_tensor_desc({DataType::Float32, {2, 3}, Dims{1}}, "t"), InvalidArgument);
  EXPECT_THROW(validate_tensor_desc({DataType::Float32, {2, 3}, Dims{3, 1, 1}}, "t"), InvalidArgument);
}

TEST(ValidateTensorDesc, BytesAndOffsetsMustFitIn64Bits) {
  constexpr std::int64_t big = std::int64_t{1} << 32;
  // 2^62 bytes is fine as a description (nothing is allocated here)...
  EXPECT_NO_THROW(validate_tensor_desc({DataType::UInt8, {big, big / 4}, std::nullopt}, "t"));
  EXPECT_NO_THROW(validate_tensor_desc({DataType::Float32, {big / 2, big / 8}, std::nullopt}, "t"));
  // ...but elements whose count (or byte size) overflows 64 bits are not
  const std::string product = message_of<InvalidArgument>(
      [&] { validate_tensor_desc({DataType::Float32, {big, big}, std::nullopt}, "Op: input"); });
  EXPECT_NE(product.find("Op: input"), std::string::npos) << product;
  EXPECT_NE(product.find("2^62 bytes"), std::string::npos) << product;
  EXPECT_THROW(validate_tensor_desc({DataType::Float64, {big / 2, big / 8}, std::nullopt}, "t"), InvalidArgument);
  EXPECT_THROW(validate_tensor_desc({DataType::UInt8, Dims::filled(8, 1 << 8), std::nullopt}, "t"), InvalidArgument);
  // the strides' reach counts too, whatever their sign, and INT64_MIN has no absolute value
  EXPECT_NO_THROW(validate_tensor_desc({DataType::Float32, {2, 3}, Dims{-(std::int64_t{1} << 40), 1}}, "t"));
  EXPECT_THROW(validate_tensor_desc({DataType::Float32, {3, 3}, Dims{std::int64_t{1} << 61, 1}}, "t"),
               InvalidArgument);
  EXPECT_THROW(validate_tensor_desc({DataType::Float32, {2, 3}, Dims{INT64_MIN, 1}}, "t"), InvalidArgument);
  // a byte step of exactly INT64_MIN: the product fits, its absolute value would not
  EXPECT_THROW(validate_tensor_desc({DataType::Float32, {2, 3}, Dims{-(std::int64_t{1} << 61), 1}}, "t"), InvalidArgument);
  EXPECT_THROW(validate_tensor_desc({DataType::UInt8, {2, 2}, Dims{INT64_MAX, INT64_MAX}}, "t"), InvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Checked arithmetic (checked.hpp), against 128-bit arithmetic as the oracle

__extension__ typedef __int128 Wide;  // GCC's and Clang's 128-bit integer: exact for any int64 product

TEST(Checked, OverflowTestsAgreeWithWideArithmetic) {
  const std::int64_t edges[] = {0, 1, -1, 2, -2, 3, 1 << 20, std::int64_t{1} << 31, std::int64_t{3} << 30,
                                std::int64_t{1} << 32, std::int64_t{1} << 61, std::int64_t{1} << 62,
                                (std::int64_t{1} << 62) + 1, INT64_MAX, INT64_MAX - 1, INT64_MIN, INT64_MIN + 1,
                                -(std::int64_t{1} << 62), -(std::int64_t{1} << 31)};
  std::uint64_t state = 18;
  std::vector<std::int64_t> values(std::begin(edges), std::end(edges));
  for (int i = 0; i < 200; ++i) values.push_back(static_cast<std::int64_t>(testing::splitmix64(state)) >> (i % 63));
  const Wide lo = INT64_MIN, hi = INT64_MAX, limit = Wide{1} << 62;
  for (std::int64_t a : values) {
    for (std::int64_t b : values) {
      const Wide product = Wide{a} * b, sum = Wide{a} + b;
      std::int64_t p = 0, s = 0;
      ASSERT_EQ(mul_overflows(a, b, &p), product < lo || product > hi) << a << " * " << b;
      if (product >= lo && product <= hi) {
        ASSERT_EQ(p, static_cast<std::int64_t>(product)) << a << " * " << b;
      }
      ASSERT_EQ(add_overflows(a, b, &s), sum < lo || sum > hi) << a << " + " << b;
      if (sum >= lo && sum <= hi) {
        ASSERT_EQ(s, static_cast<std::int64_t>(sum)) << a << " + " << b;
      }
      const bool product_fits = product >= -limit && product <= limit, sum_fits = sum >= -limit && sum <= limit;
      if (product_fits) {
        ASSERT_EQ(checked_mul(a, b, "t"), static_cast<std::int64_t>(product));
      } else {
        ASSERT_THROW(checked_mul(a, b, "t"), InvalidArgument) << a << " * " << b;
      }
      if (sum_fits) {
        ASSERT_EQ(checked_add(a, b, "t"), static_cast<std::int64_t>(sum));
      } else {
        ASSERT_THROW(checked_add(a, b, "t"), InvalidArgument) << a << " + " << b;
      }
    }
  }
}

TEST(Checked, MessagesNameTheField) {
  const std::string message = message_of<InvalidArgument>(
      [] { checked_mul(std::int64_t{1} << 40, std::int64_t{1} << 40, "Op: on spatial dimension ", 1, " the extent"); });
  EXPECT_EQ(message, "Op: on spatial dimension 1 the extent is beyond 2^62");
  // (window - 1) * dilation + 1: each factor small enough alone, their product not
  EXPECT_EQ(checked_extent(3, 2, "e"), 5);
  EXPECT_EQ(checked_extent(1, INT64_MAX, "e"), 1);
  EXPECT_EQ(checked_extent(std::int64_t{1} << 22, std::int64_t{1} << 40, "e"),
            (std::int64_t{1} << 62) - (std::int64_t{1} << 40) + 1);
  EXPECT_THROW(checked_extent((std::int64_t{1} << 22) + 1, std::int64_t{1} << 40, "e"), InvalidArgument);
  EXPECT_THROW(checked_extent((std::int64_t{1} << 24) + 1, std::int64_t{1} << 40, "e"), InvalidArgument);
}

TEST(ValidateView, ReachPast2To62BytesIsRefusedNamingTheField) {
  std::uint8_t buf[4] = {};
  const auto view = [&](Dims sizes, Dims byte_strides) { return TensorView{DataType::UInt8, sizes, byte_strides, buf}; };
  constexpr std::int64_t k60 = std::int64_t{1} << 60, k62 = std::int64_t{1} << 62;
  EXPECT_NO_THROW(validate_view(view({4}, {1}), "t"));
  EXPECT_NO_THROW(validate_view(view({4, 3}, {-1, 0}), "t"));
  EXPECT_NO_THROW(validate_view(view({2}, {k62}), "t"));  // 2^62 bytes: the limit itself
  EXPECT_NO_THROW(validate_view(view({5}, {-k60}), "t"));
  EXPECT_NO_THROW(validate_view(view({2, 2}, {k62, -k62}), "t"));  // up and down: each within
  const std::string message = message_of<InvalidArgument>([&] { validate_view(view({4}, {2 * k60}), "Padding1: input"); });
  EXPECT_EQ(message.rfind("Padding1: input has strides", 0), 0u) << message;
  EXPECT_NE(message.find("beyond 2^62 bytes"), std::string::npos) << message;
  // each axis within the limit, their sum not
  EXPECT_THROW(validate_view(view({2, 2}, {k62, 1}), "t"), InvalidArgument);
  EXPECT_THROW(validate_view(view({2, 2}, {-k62, -1}), "t"), InvalidArgument);
  // products that wrap int64 (computed naively, the reach would come out small or negative)
  EXPECT_THROW(validate_view(view({5}, {k62}), "t"), InvalidArgument);
  EXPECT_THROW(validate_view(view({3}, {INT64_MIN / 2}), "t"), InvalidArgument);
  EXPECT_THROW(validate_view(view({2}, {INT64_MIN}), "t"), InvalidArgument);
  EXPECT_THROW(validate_view(view({2}, {INT64_MAX}), "t"), InvalidArgument);
  EXPECT_THROW(validate_view(view({3, 2}, {INT64_MAX / 2 + 1, 0}), "t"), InvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// TensorView overlap

TEST(TensorView, SelfOverlap) {
  float buf[64] = {};
  EXPECT_FALSE(make_view(DataType::Float32, {3, 4}, {4, 1}, buf).may_self_overlap());   // C order
  EXPECT_FALSE(make_view(DataType::Float32, {4, 3}, {1, 4}, buf).may_self_overlap());   // transposed
  EXPECT_FALSE(make_view(DataType::Float32, {3, 4}, {8, 2}, buf).may_self_overlap());   // sliced
  EXPECT_FALSE(make_view(DataType::Float32, {3, 4}, {-4, -1}, buf + 11).may_self_overlap());  // reversed
  EXPECT_TRUE(make_view(DataType::Float32, {3, 4}, {0, 1}, buf).may_self_overlap());    // zero stride
  EXPECT_TRUE(make_view(DataType::Float32, {5}, {0}, buf).may_self_overlap());
  EXPECT_FALSE(make_view(DataType::Float32, {1, 4}, {0, 1}, buf).may_self_overlap());   // size 1: no
  EXPECT_FALSE(make_view(DataType::Float32, {1}, {0}, buf).may_self_overlap());
  EXPECT_TRUE(make_view(DataType::Float32, {2, 3}, {2, 1}, buf).may_self_overlap());   // rows interleave
  // Byte strides smaller than the element: neighbours share bytes.
  TensorView half_step{DataType::Float32, {3}, {2}, buf};
  EXPECT_TRUE(half_step.may_self_overlap());
}

TEST(TensorView, ByteSpan) {
  float buf[16] = {};
  const auto [lo, hi] = make_view(DataType::Float32, {2, 3}, {-3, 1}, buf + 3).byte_span();
  EXPECT_EQ(lo, reinterpret_cast<const std::byte*>(buf));
  EXPECT_EQ(hi, reinterpret_cast<const std::byte*>(buf + 6));
}

TEST(TensorView, MayOverlap) {
  float buf[40] = {};
  const TensorView first = make_view(DataType::Float32, {10}, {1}, buf);
  EXPECT_FALSE(may_overlap(first, make_view(DataType::Float32, {10}, {1}, buf + 10)));  // adjacent
  EXPECT_TRUE(may_overlap(first, make_view(DataType::Float32, {10}, {1}, buf + 9)));
  EXPECT_TRUE(may_overlap(first, first));
  // Reversed views: buf+19 going back covers buf[10..19]; buf+10 going back covers buf[1..10].
  EXPECT_FALSE(may_overlap(first, make_view(DataType::Float32, {10}, {-1}, buf + 19)));
  EXPECT_TRUE(may_overlap(first, make_view(DataType::Float32, {10}, {-1}, buf + 10)));
  EXPECT_TRUE(may_overlap(make_view(DataType::Float32, {10}, {-1}, buf + 10), first));
  // One byte of overlap is enough.
  TensorView bytes{DataType::UInt8, {4}, {1}, reinterpret_cast<std::byte*>(buf + 10) - 1};
  EXPECT_TRUE(may_overlap(first, bytes));
  // Even and odd elements of one buffer are disjoint but interleave: conservatively "may overlap".
  EXPECT_TRUE(may_overlap(make_view(DataType::Float32, {10}, {2}, buf),
                          make_view(DataType::Float32, {10}, {2}, buf + 1)));
}

// ---------------------------------------------------------------------------------------------
// StridedLayout and NdCounter

Dims bytes(Dims elems, std::int64_t elem_size) {
  for (std::int64_t& s : elems) s *= elem_size;
  return elems;
}

TEST(StridedLayout, CoalescesContiguousSpaceToOneDimension) {
  const Dims sizes{2, 3, 4, 5};
  StridedLayout<2> layout(sizes, {bytes(packed_strides(sizes), 4), bytes(packed_strides(sizes), 2)});
  layout.coalesce(0);
  ASSERT_EQ(layout.rank(), 1);
  EXPECT_EQ(layout.size(0), 120);
  EXPECT_EQ(layout.stride(0, 0), 4);
  EXPECT_EQ(layout.stride(1, 0), 2);
}

TEST(StridedLayout, MergesOnlyWhereEveryOperandIsContiguous) {
  // Operand 1 has a gap between rows of axis 1 (stride 10 instead of 5): axes 0+1 merge,
  // axis 2 stays.
  const Dims sizes{2, 3, 5};
  StridedLayout<2> layout(sizes, {Dims{15, 5, 1}, Dims{30, 10, 1}});
  layout.coalesce(0);
  ASSERT_EQ(layout.rank(), 2);
  EXPECT_EQ(layout.sizes(), (Dims{6, 5}));
  EXPECT_EQ(layout.stride(1, 0), 10);
  EXPECT_EQ(layout.stride(1, 1), 1);
}

TEST(StridedLayout, PinnedAxesSurvive) {
  const Dims sizes{2, 3, 4, 5};
  StridedLayout<1> layout(sizes, {bytes(packed_strides(sizes), 4)});
  layout.coalesce(1u << 2);
  ASSERT_EQ(layout.rank(), 3);
  EXPECT_EQ(layout.sizes(), (Dims{6, 4, 5}));
  EXPECT_EQ(layout.source_axis(1), 2);
  EXPECT_EQ(layout.source_axis(2), 3);
  EXPECT_EQ(layout.stride(0, 1), 20);
  EXPECT_EQ(layout.stride(0, 0), 80);

  // A pinned size-1 axis is kept too.
  StridedLayout<1> ones({1, 3, 1, 4}, {Dims{48, 16, 16, 4}});
  ones.coalesce(1u << 0);
  ASSERT_EQ(ones.rank(), 2);
  EXPECT_EQ(ones.sizes(), (Dims{1, 12}));
  EXPECT_EQ(ones.source_axis(0), 0);
}

TEST(StridedLayout, DropsSizeOneDimensions) {
  // Non-contiguous strides so nothing merges: only the size-1 axes go.
  StridedLayout<1> layout({1, 3, 1, 4, 1}, {Dims{999, 64, 7, 8, 5}});
  layout.coalesce(0);
  ASSERT_EQ(layout.rank(), 2);
  EXPECT_EQ(layout.sizes(), (Dims{3, 4}));
  EXPECT_EQ(layout.source_axis(0), 1);
  EXPECT_EQ(layout.source_axis(1), 3);
  EXPECT_EQ(layout.stride(0, 0), 64);
  EXPECT_EQ(layout.stride(0, 1), 8);

  StridedLayout<1> all_ones({1, 1}, {Dims{4, 4}});
  all_ones.coalesce(0);
  EXPECT_EQ(all_ones.rank(), 0);
}

TEST(StridedLayout, SortByStrideOnTransposedOperand) {
  // A 4x3 view of a 3x4 C-order buffer: strides (4, 16) bytes.
  StridedLayout<2> layout({4, 3}, {Dims{4, 16}, Dims{12, 4}});
  layout.sort_by_stride(0);
  EXPECT_EQ(layout.sizes(), (Dims{3, 4}));
  EXPECT_EQ(layout.source_axis(0), 1);
  EXPECT_EQ(layout.source_axis(1), 0);
  EXPECT_EQ(layout.stride(0, 0), 16);
  EXPECT_EQ(layout.stride(0, 1), 4);
  EXPECT_EQ(layout.stride(1, 0), 4);
  EXPECT_EQ(layout.stride(1, 1), 12);

  // The magnitude decides, not the sign; equal magnitudes keep their order (stable).
  StridedLayout<1> negative({2, 3, 4}, {Dims{-4, 48, -16}});
  negative.sort_by_stride(0);
  EXPECT_EQ(negative.source_axis(0), 1);
  EXPECT_EQ(negative.source_axis(1), 2);
  EXPECT_EQ(negative.source_axis(2), 0);
  StridedLayout<1> ties({2, 3}, {Dims{4, 4}});
  ties.sort_by_stride(0);
  EXPECT_EQ(ties.source_axis(0), 0);

  // Sorting a transposed operand then coalescing gives one forward row.
  StridedLayout<1> transposed({4, 3}, {Dims{4, 16}});
  transposed.sort_by_stride(0);
  transposed.coalesce(0);
  ASSERT_EQ(transposed.rank(), 1);
  EXPECT_EQ(transposed.size(0), 12);
  EXPECT_EQ(transposed.stride(0, 0), 4);
}

TEST(NdCounter, StartsAnywhereAndReportsChangedDimension) {
  const Dims sizes{2, 3, 4};
  NdCounter from17(sizes, 17);  // 17 = 1*12 + 1*4 + 1
  EXPECT_EQ(from17[0], 1);
  EXPECT_EQ(from17[1], 1);
  EXPECT_EQ(from17[2], 1);
  EXPECT_EQ(from17.next(), 2);
  EXPECT_EQ(from17[2], 2);
  EXPECT_EQ(from17.next(), 2);
  EXPECT_EQ(from17.next(), 1);  // (1,1,3) -> (1,2,0)
  EXPECT_EQ(from17[1], 2);
  EXPECT_EQ(from17[2], 0);

  NdCounter c(sizes, 0);
  for (std::int64_t flat = 0; flat < 24; ++flat) {
    ASSERT_EQ(c[0], flat / 12);
    ASSERT_EQ(c[1], flat / 4 % 3);
    ASSERT_EQ(c[2], flat % 4);
    const int changed = c.next();
    const std::int64_t n = flat + 1;
    const int want = n == 24 ? -1 : n % 12 == 0 ? 0 : n % 4 == 0 ? 1 : 2;
    ASSERT_EQ(changed, want) << "after " << flat;
  }
  EXPECT_EQ(c[0], 0);  // wrapped to the start
  EXPECT_EQ(c[2], 0);

  NdCounter last(sizes, 23);
  EXPECT_EQ(last.next(), -1);
  NdCounter scalar(Dims{}, 0);
  EXPECT_EQ(scalar.next(), -1);
}

// ---------------------------------------------------------------------------------------------
// parallel_for

class ParallelFor : public ::testing::Test {
 protected:
  void TearDown() override { set_num_threads(default_num_threads()); }
};

TEST_F(ParallelFor, CoversEveryIndexExactlyOnce) {
  const std::pair<std::int64_t, std::int64_t> ranges[] = {{0, 0}, {5, 5},    {10, 3},     {0, 1},
                                                          {0, 7}, {3, 1000}, {-50, 50}, {0, 100003}};
  const std::int64_t grains[] = {1, 2, 7, 64, 999, 100000, std::int64_t{1} << 40};
  for (int threads : {1, 2, 3, 7}) {
    set_num_threads(threads);
    ASSERT_EQ(num_threads(), threads);
    for (const auto& range : ranges) {
      const std::int64_t begin = range.first, end = range.second;  // captured below: no structured binding (Clang < 16)
      for (std::int64_t grain : grains) {
        SCOPED_TRACE("threads " + std::to_string(threads) + " range [" + std::to_string(begin) + ", " +
                     std::to_string(end) + ") grain " + std::to_string(grain));
        const std::int64_t length = std::max<std::int64_t>(end - begin, 0);
        std::vector<std::atomic<int>> hits(static_cast<std::size_t>(length));
        std::atomic<int> calls{0}, bad_chunks{0};
        std::mutex m;
        std::thread::id caller = std::this_thread::get_id();
        std::set<std::thread::id> runners;
        parallel_for(begin, end, grain, [&](std::int64_t b, std::int64_t e) {
          ++calls;
          if (b >= e || b < begin || e > end || (e - b < grain && e - b != end - begin)) ++bad_chunks;
          for (std::int64_t i = std::max(b, begin); i < std::min(e, end); ++i)
            ++hits[static_cast<std::size_t>(i - begin)];
          std::lock_guard lock(m);
          runners.insert(std::this_thread::get_id());
        });
        EXPECT_EQ(bad_chunks.load(), 0);
        for (std::int64_t i = 0; i < length; ++i)
          ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << "index " << begin + i;
        if (length == 0) {
          EXPECT_EQ(calls.load(), 0);
        } else {
          EXPECT_GE(calls.load(), 1);
          EXPECT_LE(calls.load(), kParallelChunksPerThread * threads);
        }
        // Work that fits one grain stays on the caller, in one piece.
        if (length > 0 && length <= grain) {
          EXPECT_EQ(calls.load(), 1);
          EXPECT_EQ(runners, std::set<std::thread::id>{caller});
        }
      }
    }
  }
}

TEST_F(ParallelFor, BackToBackAndSpacedCallsBothComplete) {
  // Calls in quick succession find the workers still polling for work; calls after a pause
  // longer than the polling time find them blocked and must wake them. Both must run every
  // chunk, whichever thread gets it, and return only when all have finished.
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    for (int call = 0; call < 200; ++call) {
      if (call % 10 == 9) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(threads));
      parallel_for(0, threads, 1, [&](std::int64_t b, std::int64_t e) {
        if (call % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));  // outlasts the poll
        for (std::int64_t i = b; i < e; ++i) ++hits[static_cast<std::size_t>(i)];
      });
      for (int i = 0; i < threads; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << "call " << call;
    }
  }
}

TEST_F(ParallelFor, RethrowsTheFirstExceptionAndKeepsWorking) {
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    try {
      parallel_for(0, 3000, 1, [](std::int64_t b, std::int64_t e) {
        if (b <= 1500 && 1500 < e) throw std::runtime_error("chunk holding 1500");
      });
      ADD_FAILURE() << "no exception with " << threads << " threads";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "chunk holding 1500");
    }

    // Every chunk throws: exactly one exception arrives, one of theirs, with its type intact.
    struct ChunkError {
      std::int64_t begin;
    };
    try {
      parallel_for(0, 3000, 1, [](std::int64_t b, std::int64_t) { throw ChunkError{b}; });
      ADD_FAILURE() << "no exception";
    } catch (const ChunkError& e) {
      EXPECT_GE(e.begin, 0);
      EXPECT_LT(e.begin, 3000);
    }

    // The pool is usable afterwards.
    std::atomic<std::int64_t> sum{0};
    parallel_for(0, 10000, 1, [&](std::int64_t b, std::int64_t e) {
      std::int64_t s = 0;
      for (std::int64_t i = b; i < e; ++i) s += i;
      sum += s;
    });
    EXPECT_EQ(sum.load(), 10000LL * 9999 / 2);
  }
}

TEST_F(ParallelFor, NestedCallsRunInline) {
  set_num_threads(3);
  std::atomic<std::int64_t> total{0};
  std::atomic<int> inner_calls{0}, outer_calls{0}, partial_inner{0};
  parallel_for(0, 30, 1, [&](std::int64_t b, std::int64_t e) {
    ++outer_calls;
    for (std::int64_t i = b; i < e; ++i) {
      const auto outer_thread = std::this_thread::get_id();
      parallel_for(0, 1000, 1, [&](std::int64_t ib, std::int64_t ie) {
        ++inner_calls;
        if (ib != 0 || ie != 1000 || std::this_thread::get_id() != outer_thread) ++partial_inner;
        total += ie - ib;
      });
    }
  });
  EXPECT_EQ(total.load(), 30 * 1000);
  EXPECT_EQ(inner_calls.load(), 30);  // one whole-range call per outer index
  EXPECT_EQ(partial_inner.load(), 0);
}

TEST_F(ParallelFor, SetNumThreadsInsideAChunkTakesEffectAtTheNextCall) {
  set_num_threads(2);
  std::atomic<int> seen_inside{0};
  parallel_for(0, 100, 1, [&](std::int64_t, std::int64_t) {
    set_num_threads(3);
    seen_inside = num_threads();
  });
  EXPECT_EQ(seen_inside.load(), 3);
  EXPECT_EQ(num_threads(), 3);
}

TEST_F(ParallelFor, NoMoreThreadsThanTheCountOrTheChunks) {
  for (int threads : {1, 2, 3, 5}) {
    set_num_threads(threads);
    for (std::int64_t length : {1, 2, 3, 10, 1000}) {
      std::mutex m;
      std::set<std::thread::id> runners;
      parallel_for(0, length, 1, [&](std::int64_t, std::int64_t) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));  // so that helpers do get chunks
        std::lock_guard lock(m);
        runners.insert(std::this_thread::get_id());
      });
      EXPECT_LE(static_cast<std::int64_t>(runners.size()), std::min<std::int64_t>(threads, length))
          << threads << " threads, length " << length;
    }
  }
}

TEST_F(ParallelFor, OthersTakeOverTheShareOfADescheduledThread) {
  // The first chunk a worker runs stalls (as if its thread lost the CPU): the caller and the
  // other workers must run every other chunk meanwhile, so the stalled thread ends with one.
  set_num_threads(4);
  std::mutex m;
  std::map<std::thread::id, int> chunks_by_thread;
  std::atomic<bool> stalled{false};
  const auto caller = std::this_thread::get_id();
  std::thread::id straggler;
  parallel_for(0, 64, 1, [&](std::int64_t, std::int64_t) {
    const auto me = std::this_thread::get_id();
    bool expected = false;
    if (me != caller && stalled.compare_exchange_strong(expected, true)) {
      {
        std::lock_guard lock(m);
        straggler = me;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // long enough for the workers to wake
    }
    std::lock_guard lock(m);
    ++chunks_by_thread[me];
  });
  int total = 0;
  for (const auto& [id, n] : chunks_by_thread) total += n;
  EXPECT_EQ(total, 4 * kParallelChunksPerThread);
  ASSERT_TRUE(stalled.load());
  EXPECT_EQ(chunks_by_thread[straggler], 1);
}

TEST_F(ParallelFor, OthersTakeOverRangesPastTheFirst64Threads) {
  // Thieves visit only the ranges whose flag says they have chunks left, 64 flags to a cache
  // line: with 70 threads, the front chunk of thread 66's range (its flag on the second line)
  // stalls, and every other chunk must have run before that stall ends, its range's rest
  // included.
  constexpr int kThreads = 70, kStalled = 66, kChunks = kParallelChunksPerThread * kThreads;
  set_num_threads(kThreads);
  std::vector<std::atomic<int>> hits(kChunks);
  std::atomic<int> finished{0}, finished_during_stall{-1};
  parallel_for(0, kChunks, 1, [&](std::int64_t begin, std::int64_t end) {
    ASSERT_EQ(end, begin + 1);
    ++hits[static_cast<std::size_t>(begin)];
    if (begin == kParallelChunksPerThread * kStalled) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      finished_during_stall = finished.load();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ++finished;
  });
  for (int c = 0; c < kChunks; ++c) ASSERT_EQ(hits[static_cast<std::size_t>(c)].load(), 1) << "chunk " << c;
  EXPECT_EQ(finished_during_stall.load(), kChunks - 1);
}

TEST_F(ParallelFor, EachThreadStartsOnARangeOfItsOwn) {
  // 4 threads, 16 chunks: thread t's range is chunks 4t..4t+3, and the first chunk each thread
  // runs is the front of its own (chunks take 25 ms, far longer than waking a worker, so no
  // range is emptied by others before its owner starts). The caller is thread 0.
  set_num_threads(4);
  std::mutex m;
  std::map<std::thread::id, std::vector<std::int64_t>> chunks_by_thread;
  parallel_for(0, 16, 1, [&](std::int64_t begin, std::int64_t end) {
    ASSERT_EQ(end, begin + 1);
    {
      std::lock_guard lock(m);
      chunks_by_thread[std::this_thread::get_id()].push_back(begin);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  });
  ASSERT_EQ(chunks_by_thread.size(), 4u);
  EXPECT_EQ(chunks_by_thread[std::this_thread::get_id()].front(), 0);
  std::set<std::int64_t> firsts, all;
  for (const auto& [id, chunks] : chunks_by_thread) {
    firsts.insert(chunks.front());
    all.insert(chunks.begin(), chunks.end());
    // After its first chunk a thread goes on along its range (or, once that is done, takes
    // the last chunks of the others').
    EXPECT_EQ(chunks.front() % 4, 0);
  }
  EXPECT_EQ(firsts, (std::set<std::int64_t>{0, 4, 8, 12}));
  EXPECT_EQ(all.size(), 16u);
}

TEST_F(ParallelFor, ChunksOfRangesNearTheInt64Limits) {
  set_num_threads(3);
  const std::int64_t top = std::numeric_limits<std::int64_t>::max();
  for (const auto& range : {std::pair{top - 100003, top}, std::pair{std::numeric_limits<std::int64_t>::min(),
                                                                      std::numeric_limits<std::int64_t>::min() + 777}}) {
    const std::int64_t begin = range.first, end = range.second;  // captured below: no structured binding (Clang < 16)
    std::atomic<std::int64_t> covered{0};
    std::atomic<int> outside{0};
    parallel_for(begin, end, 1, [&](std::int64_t b, std::int64_t e) {
      if (b < begin || e > end || b >= e) ++outside;
      covered += e - b;
    });
    EXPECT_EQ(outside.load(), 0);
    EXPECT_EQ(covered.load(), end - begin);
  }
}

TEST_F(ParallelFor, ALocalCountBelongsToItsThread) {
  set_num_threads(2);
  std::thread other([] {
    EXPECT_EQ(set_local_num_threads(5), 0);
    EXPECT_EQ(num_threads(), 5);
    EXPECT_EQ(global_num_threads(), 2);
    std::mutex m;
    std::set<std::thread::id> runners;
    parallel_for(0, 1000, 1, [&](std::int64_t, std::int64_t) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      std::lock_guard lock(m);
      runners.insert(std::this_thread::get_id());
    });
    EXPECT_LE(runners.size(), 5u);
    EXPECT_EQ(set_local_num_threads(0), 5);
    EXPECT_EQ(num_threads(), 2);
  });
  other.join();
  EXPECT_EQ(num_threads(), 2);
  EXPECT_THROW(set_local_num_threads(kMaxThreads + 1), InvalidArgument);
  EXPECT_THROW(set_local_num_threads(-1), InvalidArgument);
}

TEST(ParseNumThreads, AcceptsDecimalCountsWithBlanksOnly) {
  EXPECT_EQ(parse_num_threads("1"), 1);
  EXPECT_EQ(parse_num_threads("1 "), 1);
  EXPECT_EQ(parse_num_threads(" \t16\n"), 16);
  EXPECT_EQ(parse_num_threads("1024"), 1024);
  EXPECT_EQ(parse_num_threads("0012"), 12);
  for (const char* bad : {"", " ", "0", "1025", "-1", "+2", "2x", "x2", "1 2", "2.0", "99999", "0x10", "\xef\xbc\x91"})
    EXPECT_EQ(parse_num_threads(bad), std::nullopt) << '"' << bad << '"';
}

TEST_F(ParallelFor, ConcurrentCallersAllGetCorrectResults) {
  set_num_threads(2);
  constexpr int kCallers = 4, kRounds = 200;
  constexpr std::int64_t kN = 4096;
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        std::vector<std::atomic<int>> hits(kN);
        parallel_for(0, kN, 64 + t, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t i = b; i < e; ++i) ++hits[static_cast<std::size_t>(i)];
        });
        for (auto& h : hits) {
          if (h.load() != 1) {
            ++wrong;
            break;
          }
        }
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(ParallelFor, SetNumThreadsWhileOthersRun) {
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, rounds{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 2; ++t) {
    callers.emplace_back([&] {
      while (!stop.load()) {
        std::atomic<std::int64_t> sum{0};
        parallel_for(0, 20000, 100, [&](std::int64_t b, std::int64_t e) {
          std::int64_t s = 0;
          for (std::int64_t i = b; i < e; ++i) s += i;
          sum += s;
        });
        if (sum.load() != 20000LL * 19999 / 2) ++wrong;
        ++rounds;
      }
    });
  }
  // Keep resizing the pool until the callers have run plenty of rounds against it.
  for (int i = 0; i < 300 || rounds.load() < 200; ++i) set_num_threads(1 + i % 3);
  stop = true;
  for (auto& c : callers) c.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(rounds.load(), 0);
}

#if !defined(_WIN32)  // no fork() on Windows
TEST_F(ParallelFor, WorksInAForkedChild) {
  set_num_threads(2);
  // Keep the pool busy on another thread while forking, so the child may inherit the pool's
  // locks held by threads that do not exist in it.
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop.load()) parallel_for(0, 10000, 1, [](std::int64_t, std::int64_t) {});
  });
  for (int i = 0; i < 5; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::alarm(20);  // a deadlocked child dies of SIGALRM instead of hanging the suite
      std::atomic<std::int64_t> sum{0};
      parallel_for(0, 100000, 1, [&](std::int64_t b, std::int64_t e) {
        std::int64_t s = 0;
        for (std::int64_t k = b; k < e; ++k) s += k;
        sum += s;
      });
      ::_exit(sum.load() == 100000LL * 99999 / 2 ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << i << " wait status " << status;
  }
  stop = true;
  busy.join();
}
#endif

TEST_F(ParallelFor, NumThreadsMustBePositive) {
  set_num_threads(3);
  EXPECT_THROW(set_num_threads(0), InvalidArgument);
  EXPECT_THROW(set_num_threads(-1), InvalidArgument);
  EXPECT_EQ(num_threads(), 3);
  EXPECT_GE(default_num_threads(), 1);
}

TEST_F(ParallelFor, DefaultComesFromEnvironment) {
  const char* old = std::getenv("DMLOPS_NUM_THREADS");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  testing::set_env("DMLOPS_NUM_THREADS", nullptr);
  const int cpus = default_num_threads();
  EXPECT_EQ(cpus, platform::usable_cpu_count());
  testing::set_env("DMLOPS_NUM_THREADS", "3");
  EXPECT_EQ(default_num_threads(), 3);
  for (const char* ignored : {"0", "-2", "abc", "4x", ""}) {
    testing::set_env("DMLOPS_NUM_THREADS", ignored);
    EXPECT_EQ(default_num_threads(), cpus) << "DMLOPS_NUM_THREADS='" << ignored << "'";
  }
  testing::set_env("DMLOPS_NUM_THREADS", saved ? saved->c_str() : nullptr);
}

// ---------------------------------------------------------------------------------------------
// separable_gather (padding's engine), called directly

std::vector<float> iota_floats(std::size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}
Scalar float_fill(float f) { return Scalar{DataType::Float32, bits_of(f)}; }

TEST(SeparableGather, IdentityMapsAreAStridedCopy) {
  const std::vector<float> src = iota_floats(12);  // 3x4
  std::vector<float> dst(12, -1.0f);
  separable_gather(make_view(DataType::Float32, {3, 4}, {4, 1}, src.data()),
                   make_view(DataType::Float32, {3, 4}, {4, 1}, dst.data()), {{}, {}}, float_fill(0));
  EXPECT_EQ(dst, src);

  // Both axes reversed: point at the last element, negative strides.
  separable_gather(make_view(DataType::Float32, {3, 4}, {-4, -1}, src.data() + 11),
                   make_view(DataType::Float32, {3, 4}, {4, 1}, dst.data()), {{}, {}}, float_fill(0));
  for (int i = 0; i < 12; ++i) ASSERT_EQ(dst[i], 11 - i);

  // Only the rows reversed.
  separable_gather(make_view(DataType::Float32, {3, 4}, {-4, 1}, src.data() + 8),
                   make_view(DataType::Float32, {3, 4}, {4, 1}, dst.data()), {{}, {}}, float_fill(0));
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) ASSERT_EQ(dst[r * 4 + c], (2 - r) * 4 + c);

  // Transposed input (4x3 view of the 3x4 buffer).
  separable_gather(make_view(DataType::Float32, {4, 3}, {1, 4}, src.data()),
                   make_view(DataType::Float32, {4, 3}, {3, 1}, dst.data()), {{}, {}}, float_fill(0));
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) ASSERT_EQ(dst[r * 3 + c], c * 4 + r);

  // Output written into every other element of a bigger buffer: the gaps stay untouched.
  std::vector<float> wide(24, -1.0f);
  separable_gather(make_view(DataType::Float32, {3, 4}, {4, 1}, src.data()),
                   make_view(DataType::Float32, {3, 4}, {8, 2}, wide.data()), {{}, {}}, float_fill(0));
  for (int i = 0; i < 12; ++i) {
    ASSERT_EQ(wide[2 * i], i);
    ASSERT_EQ(wide[2 * i + 1], -1.0f);
  }
}

TEST(SeparableGather, FillMirrorAndBroadcastMaps) {
  const std::vector<float> src = iota_floats(6);  // 2x3
  std::vector<float> dst(4 * 5, -1.0f);
  // Rows: fill, 0, 1, fill. Columns: mirror 2 1 0, then broadcast 0 0.
  separable_gather(make_view(DataType::Float32, {2, 3}, {3, 1}, src.data()),
                   make_view(DataType::Float32, {4, 5}, {5, 1}, dst.data()), {{-1, 0, 1, -1}, {2, 1, 0, 0, 0}},
                   float_fill(9.5f));
  const std::vector<float> want = {9.5f, 9.5f, 9.5f, 9.5f, 9.5f,  //
                                   2,    1,    0,    0,    0,     //
                                   5,    4,    3,    3,    3,     //
                                   9.5f, 9.5f, 9.5f, 9.5f, 9.5f};
  EXPECT_EQ(dst, want);

  // A fill run in the middle of the inner axis.
  std::vector<float> row(5, -1.0f);
  separable_gather(make_view(DataType::Float32, {3}, {1}, src.data()),
                   make_view(DataType::Float32, {5}, {1}, row.data()),
                   {{0, -1, -1, 2, 1}}, float_fill(7.0f));
  EXPECT_EQ(row, (std::vector<float>{0, 7, 7, 2, 1}));
}

TEST(SeparableGather, OutputSizeOne) {
  const std::vector<float> src = iota_floats(12);  // 3x4
  std::vector<float> dst(4, -1.0f);
  separable_gather(make_view(DataType::Float32, {3, 4}, {4, 1}, src.data()),
                   make_view(DataType::Float32, {1, 4}, {4, 1}, dst.data()), {{2}, {}}, float_fill(0));
  EXPECT_EQ(dst, (std::vector<float>{8, 9, 10, 11}));

  separable_gather(make_view(DataType::Float32, {3, 4}, {4, 1}, src.data()),
                   make_view(DataType::Float32, {1, 4}, {4, 1}, dst.data()), {{-1}, {}}, float_fill(3.5f));
  EXPECT_EQ(dst, (std::vector<float>{3.5f, 3.5f, 3.5f, 3.5f}));

  float one = -1.0f;
  separable_gather(make_view(DataType::Float32, {3, 4}, {4, 1}, src.data()),
                   make_view(DataType::Float32, {1, 1}, {1, 1}, &one), {{1}, {3}}, float_fill(0));
  EXPECT_EQ(one, 7.0f);
  separable_gather(make_view(DataType::Float32, {3, 4}, {4, 1}, src.data()),
                   make_view(DataType::Float32, {1, 1}, {1, 1}, &one), {{1}, {-1}}, float_fill(2.0f));
  EXPECT_EQ(one, 2.0f);

  // Inner axis of size 1 under a mapped outer axis.
  std::vector<float> col(3, -1.0f);
  separable_gather(make_view(DataType::Float32, {3, 4}, {4, 1}, src.data()),
                   make_view(DataType::Float32, {3, 1}, {1, 1}, col.data()), {{2, -1, 0}, {1}}, float_fill(-5.0f));
  EXPECT_EQ(col, (std::vector<float>{9, -5, 1}));
}

TEST(SeparableGather, RejectsInconsistentArguments) {
  const std::vector<float> src = iota_floats(6);
  std::vector<float> dst(6);
  const TensorView in = make_view(DataType::Float32, {2, 3}, {3, 1}, src.data());
  const TensorView out = make_view(DataType::Float32, {2, 3}, {3, 1}, dst.data());
  EXPECT_THROW(separable_gather(in, out, std::vector<AxisMap>(1), float_fill(0)), InvalidArgument);  // map count
  EXPECT_THROW(separable_gather(in, out, {{0, 2}, {}}, float_fill(0)), InvalidArgument);          // reads row 2 of 2
  EXPECT_THROW(separable_gather(in, out, {{0, -2}, {}}, float_fill(0)), InvalidArgument);         // below -1
  EXPECT_THROW(separable_gather(in, out, {{0}, {}}, float_fill(0)), InvalidArgument);             // map length
  const TensorView wider = make_view(DataType::Float32, {2, 4}, {4, 1}, dst.data());
  EXPECT_THROW(separable_gather(in, wider, {{}, {}}, float_fill(0)), InvalidArgument);  // identity, sizes differ
  EXPECT_THROW(separable_gather(in, out, {{}, {}}, Scalar{DataType::Float64, 0}), DTypeError);   // fill width
  const TensorView halves = make_view(DataType::Float16, {2, 3}, {3, 1}, dst.data());
  EXPECT_THROW(separable_gather(in, halves, {{}, {}}, float_fill(0)), DTypeError);
  EXPECT_EQ(dst, std::vector<float>(6, 0.0f)) << "a rejected call wrote to the output";
}

// The maps nearest resampling and padding produce, plus irregular ones: every run kind of the
// kernel (fill, copy, mirror, broadcast, repeat k times with partial groups, gather) and the
// copy of repeated rows, checked element by element against a naive gather.
std::vector<std::int64_t> random_map(std::mt19937_64& rng, std::int64_t in, std::int64_t out) {
  std::uniform_int_distribution<int> kind_dist(0, 6);
  std::vector<std::int64_t> map(static_cast<std::size_t>(out));
  const int kind = kind_dist(rng);
  const std::int64_t k = std::uniform_int_distribution<std::int64_t>(1, 9)(rng);
  const std::int64_t shift = std::uniform_int_distribution<std::int64_t>(0, k)(rng);
  for (std::int64_t o = 0; o < out; ++o) {
    std::int64_t s = 0;
    switch (kind) {
      case 0: s = (o + shift) / k; break;                                            // repeat k, shifted
      case 1: s = static_cast<std::int64_t>(std::floor((o + 0.5) / 1.75)); break;    // nearest x1.75
      case 2: s = o * 3 / 2; break;                                                  // downsampling
      case 3: s = in - 1 - (o % in); break;                                          // mirror
      case 4: s = std::uniform_int_distribution<std::int64_t>(-1, in - 1)(rng); break;  // random, fills
      case 5: s = o < 3 ? -1 : (o - 3) / k; break;                                   // fill, then repeat
      default: s = o / 2 + (o % 5 == 4 ? 1 : 0); break;                              // almost repeat 2
    }
    map[static_cast<std::size_t>(o)] = std::clamp<std::int64_t>(s, -1, in - 1);
  }
  return map;
}

std::vector<AxisMap> axis_maps(const std::vector<std::vector<std::int64_t>>& indices) {
  std::vector<AxisMap> maps;
  for (const auto& map : indices) maps.push_back(map.empty() ? AxisMap{} : AxisMap::from_indices(map));
  return maps;
}

// Element type E (its width is what the kernels see: 1, 2, 4 and 8 bytes take different paths).
template <class E>
void check_random_gathers(DataType dtype, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int default_threads = default_num_threads();
  for (int round = 0; round < 300; ++round) {
    int rank = std::uniform_int_distribution<int>(1, 4)(rng);
    Dims in_sizes, out_sizes;
    std::vector<std::vector<std::int64_t>> maps(static_cast<std::size_t>(rank));  // empty: identity
    for (int a = 0; a < rank; ++a) {
      const std::int64_t in = std::uniform_int_distribution<std::int64_t>(1, rank == 1 ? 40 : 9)(rng);
      const std::int64_t out = std::uniform_int_distribution<std::int64_t>(1, rank == 1 ? 200 : 30)(rng);
      const bool identity = std::uniform_int_distribution<int>(0, 3)(rng) == 0;
      in_sizes.push_back(in);
      out_sizes.push_back(identity ? in : out);
      if (!identity) maps[static_cast<std::size_t>(a)] = random_map(rng, in, out);
    }
    if (round % 50 == 0) {  // one long row: column blocks, repeat runs cut at block edges
      rank = 1;
      in_sizes = {70000};
      out_sizes = {150001};
      maps = {std::vector<std::int64_t>(150001)};
      for (std::int64_t o = 0; o < 150001; ++o) maps[0][static_cast<std::size_t>(o)] = std::min<std::int64_t>((o + 1) / 3, 69999);
    }
    const bool reversed_input = round % 3 == 1;
    const bool strided_output = round % 4 == 2;
    const std::vector<E> src = [&] {
      std::vector<E> v(static_cast<std::size_t>(in_sizes.product()));
      std::iota(v.begin(), v.end(), E{1});
      return v;
    }();
    Dims in_strides = packed_strides(in_sizes);
    const E* in_data = src.data();
    if (reversed_input) {  // every axis walked backwards
      for (int a = 0; a < rank; ++a) in_strides[a] = -in_strides[a];
      in_data += src.size() - 1;
    }
    Dims out_strides = packed_strides(out_sizes);
    const std::int64_t step = strided_output ? 2 : 1;
    for (std::int64_t& s : out_strides) s *= step;
    std::vector<E> dst(static_cast<std::size_t>(out_sizes.product() * step), static_cast<E>(-7));
    const int threads = 1 + round % 3;
    set_num_threads(threads);
    separable_gather(make_view(dtype, in_sizes, in_strides, in_data),
                     make_view(dtype, out_sizes, out_strides, dst.data()), axis_maps(maps),
                     Scalar{dtype, static_cast<std::uint64_t>(static_cast<E>(-3)) & (~std::uint64_t{0} >> (64 - 8 * sizeof(E)))});

    std::int64_t mismatches = 0;
    Dims index = Dims::filled(rank, 0);
    for (std::int64_t flat = 0; flat < out_sizes.product(); ++flat) {
      std::int64_t in_offset = 0;
      bool fill = false;
      for (int a = 0; a < rank; ++a) {
        const std::vector<std::int64_t>& map = maps[static_cast<std::size_t>(a)];
        const std::int64_t s = map.empty() ? index[a] : map[static_cast<std::size_t>(index[a])];
        if (s < 0) fill = true;
        in_offset += s * in_strides[a];
      }
      const E want = fill ? static_cast<E>(-3) : in_data[in_offset];
      const E got = dst[static_cast<std::size_t>(flat * step)];
      if (want != got && ++mismatches <= 3)
        ADD_FAILURE() << name(dtype) << " round " << round << ", sizes " << in_sizes << " -> " << out_sizes << ", threads " << threads
                      << ", output index " << index << ": expected " << +want << " got " << +got;
      for (int a = rank - 1; a >= 0; --a) {
        if (++index[a] < out_sizes[a]) break;
        index[a] = 0;
      }
    }
    for (std::size_t i = 1; strided_output && i < dst.size(); i += 2) ASSERT_EQ(dst[i], static_cast<E>(-7)) << "gap written";
    ASSERT_EQ(mismatches, 0) << "round " << round;
  }
  set_num_threads(default_threads);
}

TEST(SeparableGather, MatchesANaiveGatherOnRandomMaps) {
  check_random_gathers<std::int32_t>(DataType::Int32, 2024);
  check_random_gathers<std::int64_t>(DataType::Int64, 2025);
  check_random_gathers<std::int16_t>(DataType::Int16, 2026);
  check_random_gathers<std::uint8_t>(DataType::UInt8, 2027);
}

// Input rows of at most 128 bytes are loaded whole and permuted, 64 output bytes at a time,
// where the ISA has the permutes (AVX-512BW, VBMI for bytes: two vectors; else AVX2 for 4- and
// 8-byte elements: four): input rows of one vector, of one vector and an element, of two, and
// output rows under one block, of one, and longer (the last block overlapping the one before),
// with fills anywhere, rows of the fill (outer map) and copies of rows (a repeated outer index).
// Random maps read any word of the row; `runs` maps are made of copies, mirrors, broadcasts and
// fills of 1-12 elements, whose 32-byte pieces mostly read a window of 8 words (AVX2 loads the
// window and permutes it) and, where two runs meet, not always.
template <class E>
void check_narrow_rows(DataType dtype, std::int64_t permuted_in_bytes, bool runs, bool fills) {
  const std::int64_t e = sizeof(E);
  std::mt19937_64 rng(static_cast<std::uint64_t>(e) * 97 + (runs ? 1 : 0) + (fills ? 2 : 0));
  const auto below = [&](std::int64_t n) { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n)); };
  for (const std::int64_t in : {std::int64_t{1}, 64 / e - 1, 64 / e, 64 / e + 1, 96 / e + 1, 128 / e - 1, 128 / e}) {
    for (const std::int64_t out : {std::int64_t{1}, 64 / e - 1, 64 / e, 64 / e + 3, 200 / e, 4096 / e}) {
      std::vector<std::int64_t> map(static_cast<std::size_t>(out));
      if (runs) {
        for (std::int64_t o = 0; o < out;) {
          const std::int64_t length = std::min(1 + below(12), out - o), kind = below(fills ? 4 : 3), from = below(in);
          for (std::int64_t j = 0; j < length; ++j, ++o) {
            const std::int64_t source = kind == 0 ? from + j : kind == 1 ? from - j : kind == 2 ? from : -1;
            map[static_cast<std::size_t>(o)] = kind == 3 ? -1 : std::clamp<std::int64_t>(source, 0, in - 1);
          }
        }
      } else {
        for (std::int64_t& m : map) m = fills ? below(in + 1) - 1 : below(in);  // -1: fill
      }
      map[0] = in - 1;  // never all fill (a fill row is not a permute)
      const std::vector<std::int64_t> rows = {1, -1, 0, 0, 2};
      std::vector<E> src(static_cast<std::size_t>(3 * in));
      for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<E>(i * 7 + 1);
      std::vector<E> dst(static_cast<std::size_t>(5 * out), E{0});
      const E fill = static_cast<E>(0x5a);
      const TensorView in_view = make_view(dtype, {3, in}, {in, 1}, src.data());
      const TensorView out_view = make_view(dtype, {5, out}, {out, 1}, dst.data());
      const std::vector<AxisMap> maps = {AxisMap::from_indices(rows), AxisMap::from_indices(map)};
      const std::map<std::string, std::int64_t> tiles = testing::tiles_of(describe_separable_gather(in_view, out_view, maps));
      // (An output axis of 1 element reads a fixed one: then the rows are the inner axis.)
      const bool border = tiles.count("border_elements") > 0;
      if (out > 1) {
        EXPECT_EQ(tiles.count("permutes") > 0, in * e <= permuted_in_bytes && !border) << name(dtype) << " " << in << " -> " << out;
      }
      if (tiles.count("permutes")) {
        EXPECT_EQ(tiles.at("permutes"), std::max<std::int64_t>(1, (out * e + 63) / 64));
      }
      separable_gather(in_view, out_view, maps, Scalar{dtype, static_cast<std::uint64_t>(fill)});
      for (std::int64_t r = 0; r < 5; ++r) {
        for (std::int64_t o = 0; o < out; ++o) {
          const std::int64_t row = rows[static_cast<std::size_t>(r)], column = map[static_cast<std::size_t>(o)];
          const E want = row < 0 || column < 0 ? fill : src[static_cast<std::size_t>(row * in + column)];
          ASSERT_EQ(dst[static_cast<std::size_t>(r * out + o)], want)
              << name(dtype) << " " << in << " -> " << out << (runs ? " runs" : "") << (fills ? " fills" : "") << " row " << r
              << " column " << o;
        }
      }
    }
  }
}

TEST(SeparableGather, NarrowRowsPermuteEveryElementSize) {
  const bool bw = DMLOPS_X86 && avx512_enabled() && platform::cpu_features().avx512bw;
  const std::int64_t wide = bw || (DMLOPS_X86 && avx2_enabled()) ? 128 : 0;  // 4- and 8-byte elements
  // (Rows with and without fills take different loops: fills blend the fill value in.)
  for (const bool runs : {false, true}) {
    for (const bool fills : {false, true}) {
      check_narrow_rows<std::uint8_t>(DataType::UInt8, DMLOPS_X86 && avx512_vbmi_enabled() ? 128 : 0, runs, fills);
      check_narrow_rows<std::uint16_t>(DataType::UInt16, bw ? 128 : 0, runs, fills);
      check_narrow_rows<std::uint32_t>(DataType::UInt32, wide, runs, fills);
      check_narrow_rows<std::uint64_t>(DataType::UInt64, wide, runs, fills);
    }
  }
}

// Irregular stretches are gathered through 32-byte windows when AVX2 is on: groups whose
// sources span exactly the window, one more element, run backwards, or end at the row's end.
template <class E>
void check_window_edges(DataType dtype) {
  constexpr std::int64_t kIn = 40, kOut = 48;
  std::vector<E> src(kIn);
  std::iota(src.begin(), src.end(), E{10});
  const std::int64_t lanes = 32 / static_cast<std::int64_t>(sizeof(E));
  const std::vector<std::function<std::int64_t(std::int64_t)>> maps = {
      [&](std::int64_t o) { return o / lanes * lanes + (o % lanes == lanes - 1 ? lanes - 2 : o % lanes); },  // fits
      [&](std::int64_t o) { return o / lanes * (lanes + 1) + (o % lanes == lanes - 1 ? lanes : o % lanes); },  // one more
      [&](std::int64_t o) { return (o / 5) * 3 + (4 - o % 5) / 2; },  // backwards in small steps
      [&](std::int64_t o) { return kIn - 1 - (o % 3) - (o % 7 == 0 ? 1 : 0); },  // at the end of the row
  };
  for (std::size_t m = 0; m < maps.size(); ++m) {
    std::vector<std::int64_t> map(kOut);
    for (std::int64_t o = 0; o < kOut; ++o) map[static_cast<std::size_t>(o)] = std::clamp<std::int64_t>(maps[m](o), 0, kIn - 1);
    std::vector<E> dst(kOut, E{0});
    separable_gather(make_view(dtype, {kIn}, {1}, src.data()), make_view(dtype, {kOut}, {1}, dst.data()),
                     {AxisMap::from_indices(map)},
                     Scalar{dtype, 0});
    for (std::int64_t o = 0; o < kOut; ++o)
      ASSERT_EQ(dst[static_cast<std::size_t>(o)], src[static_cast<std::size_t>(map[static_cast<std::size_t>(o)])])
          << name(dtype) << " map " << m << " output " << o;
  }
}

TEST(SeparableGather, WindowedGatherEdges) {
  check_window_edges<std::int32_t>(DataType::Int32);
  check_window_edges<std::int64_t>(DataType::Int64);
  check_window_edges<std::uint16_t>(DataType::UInt16);
}

TEST(SeparableGather, NearestUpsamplingRepeatsRowsAndElements) {
  // 2x3 -> 5x7: rows 0,0,1,1,1 (a repeated row copies the row above), columns each repeated.
  const std::vector<float> src = iota_floats(6);
  std::vector<float> dst(5 * 7, -1.0f);
  separable_gather(make_view(DataType::Float32, {2, 3}, {3, 1}, src.data()),
                   make_view(DataType::Float32, {5, 7}, {7, 1}, dst.data()),
                   {{0, 0, 1, 1, 1}, {0, 0, 0, 1, 1, 2, 2}}, float_fill(0));
  const std::vector<float> row0 = {0, 0, 0, 1, 1, 2, 2}, row1 = {3, 3, 3, 4, 4, 5, 5};
  for (int r = 0; r < 5; ++r) {
    const auto& want = r < 2 ? row0 : row1;
    EXPECT_EQ(std::vector<float>(dst.begin() + r * 7, dst.begin() + r * 7 + 7), want) << "row " << r;
  }
}

// ---------------------------------------------------------------------------------------------
// separable_filter (linear resampling's engine), against a dense sum over every tap combination

AxisFilter random_filter(std::mt19937_64& rng, std::int64_t in, std::int64_t out, int max_taps) {
  AxisFilter f;
  std::uniform_real_distribution<double> weight(0.05, 1.0);
  for (std::int64_t o = 0; o < out; ++o) {
    const std::int64_t taps = std::uniform_int_distribution<std::int64_t>(1, std::min<std::int64_t>(max_taps, in))(rng);
    const std::int64_t first = std::uniform_int_distribution<std::int64_t>(0, in - taps)(rng);
    std::vector<double> w(static_cast<std::size_t>(taps));
    for (double& v : w) v = weight(rng);
    f.push(first, w);
  }
  return f;
}


TEST(SeparableFilter, MatchesADenseSumOnRandomFilters) {
  std::mt19937_64 rng(77);
  const int default_threads = default_num_threads();
  const DataType dtypes[] = {DataType::Float32, DataType::Float16, DataType::Float64};
  for (int round = 0; round < 240; ++round) {
    const DataType dtype = dtypes[round % 3];
    const auto elem = static_cast<std::int64_t>(element_size(dtype));
    int rank = std::uniform_int_distribution<int>(1, 4)(rng);
    const int max_taps = round % 2 ? 2 : 6;
    Dims in_sizes, out_sizes;
    std::vector<AxisFilter> axes(static_cast<std::size_t>(rank));
    bool any = false;
    for (int a = 0; a < rank; ++a) {
      const std::int64_t in = std::uniform_int_distribution<std::int64_t>(1, rank == 1 ? 300 : 9)(rng);
      const std::int64_t out = std::uniform_int_distribution<std::int64_t>(1, rank == 1 ? 700 : 14)(rng);
      const bool identity = std::uniform_int_distribution<int>(0, 2)(rng) == 0;
      in_sizes.push_back(in);
      out_sizes.push_back(identity ? in : out);
      if (!identity) {
        axes[static_cast<std::size_t>(a)] = random_filter(rng, in, out, max_taps);
        any = true;
      }
    }
    if (round % 40 == 0) {  // big enough to be tiled and threaded
      in_sizes = {3, 70, 90};
      out_sizes = {3, 150, 40};
      axes = {AxisFilter{}, random_filter(rng, 70, 150, 2), random_filter(rng, 90, 40, max_taps)};
      rank = 3;
      any = true;
    }
    // Input: every axis reversed (round % 3 == 1) or transposed (round % 3 == 2); output strided
    // with gaps (round % 4 == 3).
    std::vector<std::byte> in_buf(static_cast<std::size_t>(in_sizes.product() * elem));
    std::uniform_real_distribution<double> value(-4.0, 4.0);
    for (std::int64_t i = 0; i < in_sizes.product(); ++i) store_float(dtype, in_buf.data() + i * elem, value(rng));
    Dims in_strides = packed_strides(in_sizes);
    std::byte* in_data = in_buf.data();
    if (round % 3 == 1) {
      for (std::int64_t& st : in_strides) st = -st;
      in_data += (in_sizes.product() - 1) * elem;
    } else if (round % 3 == 2 && rank >= 2) {
      Dims reversed_sizes(in_sizes.begin(), in_sizes.end());
      std::reverse(reversed_sizes.begin(), reversed_sizes.end());
      const Dims column_major = packed_strides(reversed_sizes);
      for (int a = 0; a < rank; ++a) in_strides[a] = column_major[rank - 1 - a];
    }
    const std::int64_t step = round % 4 == 3 ? 2 : 1;
    Dims out_strides = packed_strides(out_sizes);
    for (std::int64_t& st : out_strides) st *= step;
    std::vector<std::byte> out_buf(static_cast<std::size_t>(out_sizes.product() * step * elem), std::byte{0x5a});
    const int threads = 1 + round % 3;
    set_num_threads(threads);
    separable_filter(make_view(dtype, in_sizes, in_strides, in_data), make_view(dtype, out_sizes, out_strides, out_buf.data()),
                     axes);

    const double eps = dtype == DataType::Float64 ? 0x1p-52 : 0x1p-23;
    std::int64_t mismatches = 0;
    Dims index = Dims::filled(rank, 0);
    for (std::int64_t flat = 0; flat < out_sizes.product(); ++flat) {
      // Dense sum over the tap combinations, in double, with the bound sum |w x| for the tolerance.
      double sum = 0.0, magnitude = 0.0;
      Dims tap = Dims::filled(rank, 0);
      for (;;) {
        double w = 1.0;
        std::int64_t offset = 0;
        for (int a = 0; a < rank; ++a) {
          const AxisFilter& f = axes[static_cast<std::size_t>(a)];
          const std::int64_t o = index[a];
          const std::int64_t i = f.identity() ? o : f.first[static_cast<std::size_t>(o)] + tap[a];
          if (!f.identity()) w *= f.weights[static_cast<std::size_t>(f.begin[static_cast<std::size_t>(o)] + tap[a])];
          offset += i * in_strides[a];
        }
        const double x = float_at(dtype, in_data + offset * elem);
        sum += w * x;
        magnitude += std::fabs(w * x);
        int a = rank - 1;
        for (; a >= 0; --a) {
          const AxisFilter& f = axes[static_cast<std::size_t>(a)];
          if (!f.identity() && ++tap[a] < f.taps(index[a])) break;
          tap[a] = 0;
        }
        if (a < 0) break;
      }
      std::int64_t out_offset = 0;
      for (int a = 0; a < rank; ++a) out_offset += index[a] * out_strides[a];
      const double got = float_at(dtype, out_buf.data() + out_offset * elem);
      // Passes x taps roundings in the working precision; FLOAT16 adds one rounding to half.
      double tolerance = 4.0 * rank * max_taps * eps * magnitude;
      if (dtype == DataType::Float16) tolerance += std::fabs(sum) * 0x1p-11 + 0x1p-24;
      if (!(std::fabs(got - sum) <= tolerance) && ++mismatches <= 3)
        ADD_FAILURE() << "round " << round << " " << name(dtype) << ", sizes " << in_sizes << " -> " << out_sizes
                      << ", threads " << threads << ", output " << index << ": expected " << sum << " got " << got;
      for (int a = rank - 1; a >= 0; --a) {
        if (++index[a] < out_sizes[a]) break;
        index[a] = 0;
      }
    }
    ASSERT_EQ(mismatches, 0) << "round " << round << (any ? "" : " (a plain copy)");
    for (std::size_t i = static_cast<std::size_t>(elem); step == 2 && i < out_buf.size(); i += static_cast<std::size_t>(2 * elem))
      ASSERT_EQ(out_buf[i], std::byte{0x5a}) << "gap written";
  }
  set_num_threads(default_threads);
}

TEST(SeparableFilter, BilinearTwoByTwoIsTheDxDispatchTable) {
  // Half-pixel linear x2 on [[1, 2], [3, 4]] (the spec's DxDispatch check): weights
  // (0.75, 0.25) between neighbours, 1 at the clamped edges.
  AxisFilter f;
  f.push(0, {1.0});
  f.push(0, {0.75, 0.25});
  f.push(0, {0.25, 0.75});
  f.push(1, {1.0});
  const std::vector<float> src = {1, 2, 3, 4};
  std::vector<float> dst(16, 0.0f);
  separable_filter(make_view(DataType::Float32, {2, 2}, {2, 1}, src.data()),
                   make_view(DataType::Float32, {4, 4}, {4, 1}, dst.data()), {f, f});
  EXPECT_EQ(dst, (std::vector<float>{1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f,
                                     3.75f, 4}));
}

// A given pass order: the cheapest order's bits when it is that order, the same filter rounded
// otherwise; a part of the array (some outputs of axis 0, from the input rows they read)
// filtered in the whole call's order has the whole call's bits (what dmlops.dask relies on).
TEST(SeparableFilter, AGivenPassOrderFixesTheRounding) {
  std::mt19937_64 rng(91);
  const Dims in_sizes{6, 7, 8, 3}, out_sizes{5, 9, 4, 3};
  std::vector<AxisFilter> axes = {random_filter(rng, 6, 5, 3), random_filter(rng, 7, 9, 2), random_filter(rng, 8, 4, 4),
                                  AxisFilter{}};
  std::vector<float> src(static_cast<std::size_t>(in_sizes.product()));
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  for (float& v : src) v = value(rng);
  const TensorView in = make_view(DataType::Float32, in_sizes, packed_strides(in_sizes), src.data());
  const auto filtered = [&](const std::vector<int>& order) {
    std::vector<float> dst(static_cast<std::size_t>(out_sizes.product()));
    separable_filter(in, make_view(DataType::Float32, out_sizes, packed_strides(out_sizes), dst.data()), axes, order);
    return dst;
  };
  const std::vector<float> cheapest = filtered({});
  const KernelPlan plan = describe_separable_filter(in, make_view(DataType::Float32, out_sizes, packed_strides(out_sizes),
                                                                  nullptr), axes);
  std::vector<int> chosen;
  for (const auto& [name, value] : plan.tiles) {
    if (name.rfind("pass", 0) == 0) chosen.push_back(static_cast<int>(value));
  }
  ASSERT_EQ(chosen.size(), 3u);
  EXPECT_EQ(filtered(chosen), cheapest);
  std::vector<int> with_identity = chosen;
  with_identity.insert(with_identity.begin() + 1, 3);  // axis 3 is the identity: skipped
  EXPECT_EQ(filtered(with_identity), cheapest);
  std::vector<int> order{0, 1, 2};
  do {
    const std::vector<float> other = filtered(order);
    for (std::size_t i = 0; i < other.size(); ++i) ASSERT_NEAR(other[i], cheapest[i], 1e-4f) << "element " << i;
    // Outputs 1..3 of axis 0, from the input rows they read, in this order: the whole call's bits.
    const std::vector<float> whole = filtered(order);
    AxisFilter part;
    std::int64_t lo = axes[0].first[1];
    for (std::int64_t o = 1; o < 4; ++o) lo = std::min(lo, axes[0].first[static_cast<std::size_t>(o)]);
    std::int64_t hi = 0;
    for (std::int64_t o = 1; o < 4; ++o) {
      const auto b = static_cast<std::size_t>(axes[0].begin[static_cast<std::size_t>(o)]);
      part.push(axes[0].first[static_cast<std::size_t>(o)] - lo,
                std::vector<double>(axes[0].weights.begin() + static_cast<std::ptrdiff_t>(b),
                                    axes[0].weights.begin() + static_cast<std::ptrdiff_t>(b + static_cast<std::size_t>(axes[0].taps(o)))));
      hi = std::max(hi, axes[0].first[static_cast<std::size_t>(o)] + axes[0].taps(o));
    }
    const Dims part_in{hi - lo, 7, 8, 3}, part_out{3, 9, 4, 3};
    std::vector<float> dst(static_cast<std::size_t>(part_out.product()));
    separable_filter(make_view(DataType::Float32, part_in, packed_strides(in_sizes), src.data() + lo * 7 * 8 * 3),
                     make_view(DataType::Float32, part_out, packed_strides(part_out), dst.data()),
                     {part, axes[1], axes[2], AxisFilter{}}, order);
    EXPECT_TRUE(std::equal(dst.begin(), dst.end(), whole.begin() + 9 * 4 * 3)) << "order " << order[0] << order[1] << order[2];
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_THROW(filtered({0, 1}), InvalidArgument);        // axis 2 missing
  EXPECT_THROW(filtered({0, 1, 1, 2}), InvalidArgument);  // axis 1 twice
  EXPECT_THROW(filtered({0, 1, 2, 4}), InvalidArgument);  // no axis 4
}

TEST(SeparableFilter, RejectsInconsistentArguments) {
  const std::vector<float> src(6, 1.0f);
  std::vector<float> dst(6, 0.0f);
  const TensorView in = make_view(DataType::Float32, {2, 3}, {3, 1}, src.data());
  const TensorView out = make_view(DataType::Float32, {2, 3}, {3, 1}, dst.data());
  AxisFilter past_the_end;
  for (int o = 0; o < 3; ++o) past_the_end.push(o + 1, {1.0});  // output 2 reads index 3 of 3
  EXPECT_THROW(separable_filter(in, out, {AxisFilter{}, past_the_end}), InvalidArgument);
  AxisFilter too_short;
  too_short.push(0, {1.0});
  EXPECT_THROW(separable_filter(in, out, {AxisFilter{}, too_short}), InvalidArgument);
  AxisFilter no_taps;
  for (int o = 0; o < 3; ++o) no_taps.push(o, o == 1 ? std::vector<double>{} : std::vector<double>{1.0});
  EXPECT_THROW(separable_filter(in, out, {AxisFilter{}, no_taps}), InvalidArgument);
  EXPECT_THROW(separable_filter(in, out, {AxisFilter{}}), InvalidArgument);
  const std::vector<std::int32_t> ints(6, 1);
  EXPECT_THROW(separable_filter(make_view(DataType::Int32, {2, 3}, {3, 1}, ints.data()),
                                make_view(DataType::Int32, {2, 3}, {3, 1}, dst.data()), {AxisFilter{}, AxisFilter{}}),
               DTypeError);
  EXPECT_EQ(dst, std::vector<float>(6, 0.0f)) << "a rejected call wrote to the output";
}

}  // namespace
}  // namespace dmlops

// ---------------------------------------------------------------------------------------------
// WindowAxis / window_axes: the sliding-window geometry shared by windowed operators.

namespace dmlops {
namespace {

TEST(Window, OutputSizeAndValidTapsMatchABruteForceCount) {
  for (std::int64_t in = 1; in <= 9; ++in)
    for (std::int64_t window = 1; window <= 4; ++window)
      for (std::int64_t stride = 1; stride <= 3; ++stride)
        for (std::int64_t dilation = 1; dilation <= 3; ++dilation)
          for (std::int64_t start = 0; start <= 3; ++start)
            for (std::int64_t end = 0; end <= 3; ++end) {
              const WindowAxis w{in, window, stride, dilation, start, end};
              if (in + start + end < w.extent()) continue;
              // brute force: count positions whose last tap stays inside the padded input
              std::int64_t outs = 0;
              while ((outs * stride) + w.extent() <= in + start + end) ++outs;
              ASSERT_EQ(w.out(), outs);
              for (std::int64_t o = 0; o < w.out(); ++o) {
                const auto [first, last] = w.valid_taps(o);
                for (std::int64_t t = 0; t < window; ++t) {
                  const std::int64_t i = w.input_index(o, t);
                  const bool inside = i >= 0 && i < in;
                  ASSERT_EQ(inside, t >= first && t < last)
                      << "in " << in << " window " << window << " stride " << stride << " dilation " << dilation
                      << " start " << start << " o " << o << " t " << t;
                }
              }
            }
}

TEST(Window, AxesDefaultsAndErrors) {
  const Dims in{5, 7};
  auto axes = window_axes("Op", "window_size", in, WindowParams{{3, 2}, {}, {}, {}, {}});
  ASSERT_EQ(axes.size(), 2u);
  EXPECT_EQ(axes[0].out(), 3);
  EXPECT_EQ(axes[1].out(), 6);
  EXPECT_EQ(axes[1].stride, 1);
  EXPECT_EQ(axes[1].start, 0);
  EXPECT_THROW(window_axes("Op", "window_size", in, WindowParams{{3}, {}, {}, {}, {}}), InvalidArgument);
  EXPECT_THROW(window_axes("Op", "window_size", in, WindowParams{{3, 0}, {}, {}, {}, {}}), InvalidArgument);
  EXPECT_THROW(window_axes("Op", "window_size", in, WindowParams{{3, 2}, {1, 0}, {}, {}, {}}), InvalidArgument);
  EXPECT_THROW(window_axes("Op", "window_size", in, WindowParams{{3, 2}, {}, {}, {0, -1}, {}}), InvalidArgument);
  try {
    window_axes("LpPooling", "window_size", in, WindowParams{{6, 2}, {}, {}, {}, {}});
    FAIL() << "a window larger than the padded input must be rejected";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("LpPooling: on spatial dimension 0 the window extent 6"), std::string::npos)
        << e.what();
  }
  // padding makes room for the window
  EXPECT_EQ(window_axes("Op", "w", in, WindowParams{{6, 2}, {}, {}, {1, 0}, {0, 0}})[0].out(), 1);
}

TEST(Window, OutputsReadingMatchABruteForceScan) {
  for (std::int64_t in = 1; in <= 8; ++in)
    for (std::int64_t window = 1; window <= 4; ++window)
      for (std::int64_t stride = 1; stride <= 3; ++stride)
        for (std::int64_t dilation = 1; dilation <= 3; ++dilation)
          for (std::int64_t start = 0; start <= 3; ++start)
            for (std::int64_t end = 0; end <= 3; ++end) {
              const WindowAxis w{in, window, stride, dilation, start, end};
              if (in + start + end < w.extent()) continue;
              for (std::int64_t t = 0; t < window; ++t)
                for (std::int64_t i_begin = -1; i_begin <= in; ++i_begin)
                  for (std::int64_t i_end = i_begin; i_end <= in + 1; ++i_end) {
                    const auto [first, last] = w.outputs_reading(t, i_begin, i_end);
                    ASSERT_LE(first, last);
                    for (std::int64_t o = 0; o < w.out(); ++o) {
                      const std::int64_t i = w.input_index(o, t);
                      ASSERT_EQ(i >= i_begin && i < i_end, o >= first && o < last)
                          << "in " << in << " window " << window << " stride " << stride << " dilation " << dilation
                          << " start " << start << " tap " << t << " range [" << i_begin << ", " << i_end << ") o " << o;
                    }
                  }
              for (std::int64_t t = 0; t < window; ++t) EXPECT_EQ(w.valid_outputs(t), w.outputs_reading(t, 0, in));
            }
}

// What BlockWalker::walk reported, block by block.
struct WalkRecord {
  enum Kind { Unseen, Padding, Inside };
  std::vector<Kind> kinds;
  std::vector<std::int64_t> offsets;
  std::int64_t last_col = -1;
  bool in_order = true, overlap = false;
  explicit WalkRecord(std::int64_t blocks)
      : kinds(static_cast<std::size_t>(blocks), Unseen), offsets(static_cast<std::size_t>(blocks), 0) {}
  void run(std::int64_t col, std::int64_t count) {
    in_order = in_order && col > last_col && count > 0;  // increasing, and no empty runs
    last_col = col;
  }
  void mark(std::int64_t col, Kind kind, std::int64_t offset) {
    const auto c = static_cast<std::size_t>(col);
    overlap = overlap || kinds[c] != Unseen;
    kinds[c] = kind;
    offsets[c] = offset;
  }
};

// Records one walk of `tap` and checks it block by block: each block with in_range(col, b) is
// reported exactly once, in increasing col order, as padding exactly when some axis reads
// outside the input, else with offset base + sum_d p_d * position_strides[d]; no other block is.
// With kRowsForm, `inside` also takes the rows form (several runs in one call), as a caller may.
template <bool kRowsForm, class Walk, class InRange>
void expect_walk_matches(const std::vector<WindowAxis>& axes, const Dims& tap, const Dims& position_strides,
                         std::int64_t base, Walk&& walk, InRange&& in_range, const std::string& context) {
  const int rank = static_cast<int>(axes.size());
  std::int64_t blocks = 1;
  for (const WindowAxis& a : axes) blocks *= a.out();
  WalkRecord record(blocks);
  const auto padding = [&](std::int64_t col, std::int64_t count) {
    record.run(col, count);
    for (std::int64_t j = 0; j < count; ++j) record.mark(col + j, WalkRecord::Padding, 0);
  };
  const auto inside = [&](std::int64_t col, std::int64_t offset, std::int64_t step, std::int64_t count) {
    record.run(col, count);
    for (std::int64_t j = 0; j < count; ++j) record.mark(col + j, WalkRecord::Inside, offset + j * step);
  };
  if constexpr (kRowsForm) {
    walk(padding, Overloaded{inside, [&](std::int64_t col, std::int64_t offset, std::int64_t step, std::int64_t count,
                                         std::int64_t row_step, std::int64_t rows, std::int64_t pitch) {
                               record.run(col, rows * pitch);
                               for (std::int64_t r = 0; r < rows; ++r) {
                                 for (std::int64_t j = 0; j < count; ++j)
                                   record.mark(col + r * pitch + j, WalkRecord::Inside, offset + r * row_step + j * step);
                                 for (std::int64_t j = count; j < pitch && r + 1 < rows; ++j)  // padding between runs
                                   record.mark(col + r * pitch + j, WalkRecord::Padding, 0);
                               }
                             }});
  } else {
    walk(padding, inside);
  }
  ASSERT_TRUE(record.in_order) << context;
  ASSERT_FALSE(record.overlap) << context;
  for (std::int64_t col = 0; col < blocks; ++col) {
    std::int64_t rest = col, offset = base;
    Dims b = Dims::filled(rank, 0);
    for (int d = rank - 1; d >= 0; --d) {
      b[d] = rest % axes[static_cast<std::size_t>(d)].out();
      rest /= axes[static_cast<std::size_t>(d)].out();
    }
    bool inside = true;
    for (int d = 0; d < rank; ++d) {
      const std::int64_t p = axes[static_cast<std::size_t>(d)].input_index(b[d], tap[d]);
      inside = inside && p >= 0 && p < axes[static_cast<std::size_t>(d)].in;
      offset += p * position_strides[d];
    }
    const auto kind = !in_range(col, b) ? WalkRecord::Unseen : inside ? WalkRecord::Inside : WalkRecord::Padding;
    const auto c = static_cast<std::size_t>(col);
    ASSERT_EQ(record.kinds[c], kind) << context << " block " << b;
    if (kind == WalkRecord::Inside) {
      ASSERT_EQ(record.offsets[c], offset) << context << " block " << b;
    }
  }
}

TEST(BlockWalker, WalkMatchesEveryBlockComputedDirectly) {
  // Random geometries in 1 to 4 dimensions, every tap, random b_0 ranges.
  std::mt19937 rng(4242);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 400; ++trial) {
    const int rank = pick(1, 4);
    std::vector<WindowAxis> axes;
    Dims position_strides;
    for (int d = 0; d < rank; ++d) {
      WindowAxis a{pick(1, 6), pick(1, 3), pick(1, 3), pick(1, 2), pick(0, 2), pick(0, 2)};
      a.end = std::max(a.end, a.extent() - a.in - a.start);
      axes.push_back(a);
      position_strides.push_back(pick(-20, 20));
    }
    const BlockWalker walker(axes);
    ASSERT_EQ(walker.rank(), rank);
    std::int64_t taps = 1, blocks = 1;
    for (const WindowAxis& a : axes) {
      taps *= a.window;
      blocks *= a.out();
    }
    ASSERT_EQ(walker.tap_count(), taps);
    ASSERT_EQ(walker.block_count(), blocks);
    const std::int64_t b0_first = pick(0, static_cast<int>(axes[0].out() - 1));
    const std::int64_t b0_last = pick(static_cast<int>(b0_first), static_cast<int>(axes[0].out()));
    const std::int64_t base = pick(-5, 5);
    for (std::int64_t k = 0; k < taps; ++k) {
      const Dims tap = walker.tap(k);
      const auto walk = [&](auto&& padding, auto&& inside) {
        walker.walk(tap, b0_first, b0_last, position_strides, base, padding, inside);
      };
      const auto in_range = [&](std::int64_t, const Dims& b) { return b[0] >= b0_first && b[0] < b0_last; };
      const std::string context = "trial " + std::to_string(trial) + " tap " + std::to_string(k);
      expect_walk_matches<false>(axes, tap, position_strides, base, walk, in_range, context);
      expect_walk_matches<true>(axes, tap, position_strides, base, walk, in_range, context + " (rows form)");
    }
  }
}

TEST(BlockWalker, WalkSpanMatchesEveryBlockComputedDirectly) {
  // walk_span over random flat ranges (starting and ending inside rows), including axes with a
  // negative end padding (a transposed convolution's output walk).
  std::mt19937 rng(777);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 400; ++trial) {
    const int rank = pick(1, 4);
    std::vector<WindowAxis> axes;
    Dims position_strides;
    for (int d = 0; d < rank; ++d) {
      WindowAxis a{pick(1, 6), pick(1, 3), pick(1, 3), pick(1, 2), pick(0, 2), 0};
      const std::int64_t slack = a.in + a.start - a.extent();  // end >= -slack keeps one block
      a.end = pick(static_cast<int>(std::min<std::int64_t>(0, -slack)), 2);
      if (a.in + a.start + a.end < a.extent()) a.end = a.extent() - a.in - a.start;
      axes.push_back(a);
      position_strides.push_back(pick(-20, 20));
    }
    const BlockWalker walker(axes);
    const std::int64_t blocks = walker.block_count();
    const std::int64_t c0 = pick(0, static_cast<int>(blocks - 1));
    const std::int64_t c1 = pick(static_cast<int>(c0), static_cast<int>(blocks));
    const std::int64_t base = pick(-5, 5);
    for (std::int64_t k = 0; k < walker.tap_count(); ++k) {
      const Dims tap = walker.tap(k);
      const auto walk = [&](auto&& padding, auto&& inside) {
        walker.walk_span(tap, c0, c1, position_strides, base, padding, inside);
      };
      const auto in_range = [&](std::int64_t col, const Dims&) { return col >= c0 && col < c1; };
      const std::string context = "trial " + std::to_string(trial) + " tap " + std::to_string(k) + " span [" +
                                  std::to_string(c0) + ", " + std::to_string(c1) + ")";
      expect_walk_matches<false>(axes, tap, position_strides, base, walk, in_range, context);
      expect_walk_matches<true>(axes, tap, position_strides, base, walk, in_range, context + " (rows form)");
    }
  }
}

TEST(BlockWalker, MergesBackToBackRuns) {
  // Stride 1, padding 1, 3x3 window on 4x5: the centre tap reads the whole input in order, so
  // its 20 blocks are one run; a corner tap alternates padding and inside runs per row.
  const BlockWalker walker({WindowAxis{4, 3, 1, 1, 1, 1}, WindowAxis{5, 3, 1, 1, 1, 1}});
  const Dims position_strides{5, 1};  // a packed 4x5 plane, in elements
  std::vector<std::string> runs;
  const auto record = [&](std::int64_t k) {
    runs.clear();
    walker.walk(
        walker.tap(k), 0, 4, position_strides, 0,
        [&](std::int64_t col, std::int64_t count) { runs.push_back("pad " + std::to_string(col) + "+" + std::to_string(count)); },
        [&](std::int64_t col, std::int64_t offset, std::int64_t step, std::int64_t count) {
          runs.push_back("in " + std::to_string(col) + "+" + std::to_string(count) + " @" + std::to_string(offset) + "/" +
                         std::to_string(step));
        });
    return runs;
  };
  EXPECT_EQ(record(4), (std::vector<std::string>{"in 0+20 @0/1"}));
  EXPECT_EQ(record(0), (std::vector<std::string>{"pad 0+6", "in 6+4 @0/1", "pad 10+1", "in 11+4 @5/1", "pad 15+1",
                                                 "in 16+4 @10/1"}));
  EXPECT_EQ(walker.tap(5), (Dims{1, 2}));
  EXPECT_EQ(walker.block_stride(0), 5);
  EXPECT_EQ(walker.blocks(), (Dims{4, 5}));
}

TEST(BlockWalker, HandsATapsRowsToTheRowsForm) {
  // A 3x3x3 window on a 4x5x5 box: each b_0 of a tap is 3 rows of blocks along the last two
  // axes, back to back in col but not in the input, so a caller that takes the rows form gets
  // one call per b_0. Padded by 1 along the last axis, a corner tap's rows have a padding block
  // before each: the first one and the padding after the last row are reported as padding.
  const auto walk = [](const WindowAxis& last, std::int64_t k) {
    const BlockWalker walker({WindowAxis{4, 3, 1, 1, 0, 0}, WindowAxis{5, 3, 1, 1, 0, 0}, last});
    std::vector<std::string> runs;
    walker.walk(
        walker.tap(k), 0, walker.blocks()[0], Dims{25, 5, 1}, 0,
        [&](std::int64_t col, std::int64_t count) { runs.push_back("pad " + std::to_string(col) + "+" + std::to_string(count)); },
        Overloaded{[&](std::int64_t col, std::int64_t offset, std::int64_t, std::int64_t count) {
                     runs.push_back("in " + std::to_string(col) + "+" + std::to_string(count) + " @" + std::to_string(offset));
                   },
                   [&](std::int64_t col, std::int64_t offset, std::int64_t, std::int64_t count, std::int64_t row_step,
                       std::int64_t rows, std::int64_t pitch) {
                     runs.push_back("rows " + std::to_string(col) + " " + std::to_string(rows) + "x" + std::to_string(count) +
                                    "/" + std::to_string(pitch) + " @" + std::to_string(offset) + "+" +
                                    std::to_string(row_step));
                   }});
    return runs;
  };
  EXPECT_EQ(walk(WindowAxis{5, 3, 1, 1, 0, 0}, 13), (std::vector<std::string>{"rows 0 3x3/3 @31+5", "rows 9 3x3/3 @56+5"}));
  EXPECT_EQ(walk(WindowAxis{5, 3, 1, 1, 1, 1}, 0),
            (std::vector<std::string>{"pad 0+1", "rows 1 3x4/5 @0+5", "pad 15+1", "rows 16 3x4/5 @25+5"}));
}

TEST(BlockWalker, RejectsInvalidAxes) {
  EXPECT_THROW(BlockWalker({}), InvalidArgument);
  EXPECT_THROW(BlockWalker({WindowAxis{3, 0, 1, 1, 0, 0}}), InvalidArgument);
  EXPECT_THROW(BlockWalker({WindowAxis{3, 5, 1, 1, 0, 0}}), InvalidArgument);  // no block fits
  EXPECT_THROW(BlockWalker(std::vector<WindowAxis>(7, WindowAxis{std::int64_t{1} << 40, 1, 1, 1, 0, 0})), InvalidArgument);
}

// fill_row / copy_row: every step the kernels use (unit, stride 2, other, negative, broadcast),
// aligned and misaligned, short and long rows (past kWideFillBytes: AVX2's fill, and its tail);
// nothing outside the row is touched.
template <class T>
void check_rows() {
  constexpr auto e = static_cast<std::int64_t>(sizeof(T));
  constexpr std::int64_t kMax = 200;  // the longest row
  for (std::int64_t misalign : {std::int64_t{0}, std::int64_t{1}}) {
    for (std::int64_t n : std::initializer_list<std::int64_t>{0, 1, 2, 3, 17, 64, 65, 127, kMax}) {
      for (std::int64_t src_mul : {-3, -1, 0, 1, 2, 3}) {
        for (std::int64_t dst_mul : {1, 2, -1}) {
          std::vector<std::byte> src(static_cast<std::size_t>((3 * kMax + 2) * e + 1));
          for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 37 + 11);
          std::vector<std::byte> dst(static_cast<std::size_t>((2 * kMax + 2) * e + 1), std::byte{0x5a});
          const std::vector<std::byte> before = dst;
          // Start in the middle so negative steps stay inside the buffers.
          const std::byte* s = src.data() + misalign + (src_mul < 0 ? 3 * kMax * e : 0);
          std::byte* d = dst.data() + misalign + (dst_mul < 0 ? 2 * kMax * e : e);
          copy_row<T>(d, dst_mul * e, s, src_mul * e, n);
          std::vector<bool> written(dst.size(), false);
          for (std::int64_t i = 0; i < n; ++i) {
            const std::byte* want = s + i * src_mul * e;
            std::byte* got = d + i * dst_mul * e;
            ASSERT_EQ(std::memcmp(got, want, sizeof(T)), 0)
                << "copy_row element " << i << " of " << n << ", steps " << dst_mul << "/" << src_mul << ", misalign "
                << misalign << ", width " << sizeof(T);
            for (std::int64_t b = 0; b < e; ++b) written[static_cast<std::size_t>(got - dst.data() + b)] = true;
          }
          for (std::size_t i = 0; i < dst.size(); ++i)
            ASSERT_TRUE(written[i] || dst[i] == before[i]) << "copy_row wrote outside the row at byte " << i;
          // fill_row on the same destination pattern
          std::vector<std::byte> filled(before);
          T value;
          std::memset(&value, 0xc3, sizeof(T));
          fill_row<T>(filled.data() + (d - dst.data()), dst_mul * e, value, n);
          for (std::size_t i = 0; i < filled.size(); ++i)
            ASSERT_EQ(filled[i], written[i] ? std::byte{0xc3} : before[i]) << "fill_row byte " << i << " of row " << n;
        }
      }
    }
  }
}

TEST(Rows, CopyAndFillEveryStepWidthAndAlignment) {
  check_rows<std::uint8_t>();
  check_rows<std::uint16_t>();
  check_rows<std::uint32_t>();
  check_rows<std::uint64_t>();
}

// copy_row with source step 2 (a stride-2 window) reads elements in pairs: every length through
// the vector loop and its tail, from a source buffer that ends at the last element read (the
// sanitizer build sees any read past it).
template <class T>
void check_even_rows() {
  constexpr auto e = static_cast<std::int64_t>(sizeof(T));
  constexpr std::size_t kGuard = 64;  // bytes past the rows that must stay untouched
  for (std::int64_t n = 1; n <= 200; ++n) {
    for (std::int64_t rows : {1, 3}) {
      // Row r of src at r * src_step, of dst at r * dst_step (steps past a row's own bytes).
      const std::int64_t src_step = (2 * n + 3) * e, dst_step = (n + 1) * e;
      std::vector<std::byte> src(static_cast<std::size_t>((rows - 1) * src_step + (2 * n - 1) * e));
      for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 37 + 11);
      std::vector<std::byte> dst(static_cast<std::size_t>((rows - 1) * dst_step + n * e) + kGuard, std::byte{0x5a});
      if (rows == 1) copy_row<T>(dst.data(), e, src.data(), 2 * e, n);
      else copy_rows<T>(dst.data(), dst_step, e, src.data(), src_step, 2 * e, n, rows);
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t i = 0; i < n; ++i)
          ASSERT_EQ(std::memcmp(dst.data() + r * dst_step + i * e, src.data() + r * src_step + 2 * i * e, sizeof(T)), 0)
              << "element " << i << " of " << n << ", row " << r << ", width " << sizeof(T);
        const std::int64_t gap_end = r + 1 < rows ? (r + 1) * dst_step : static_cast<std::int64_t>(dst.size());
        for (std::int64_t b = r * dst_step + n * e; b < gap_end; ++b)
          ASSERT_EQ(dst[static_cast<std::size_t>(b)], std::byte{0x5a}) << "byte " << b << " past row " << r << ", n " << n;
      }
    }
  }
}

TEST(Rows, CopyEveryOtherElementEveryLength) {
  check_even_rows<std::uint8_t>();
  check_even_rows<std::uint16_t>();
  check_even_rows<std::uint32_t>();
  check_even_rows<std::uint64_t>();
}

// zeros_then_even_rows (a stride-2 window's rows after its leading padding): every count of
// zeros the byte permute takes (up to 64 bytes) and beyond, every length through its first,
// middle and last blocks, and no byte written past a row. The source rows lie between bytes
// that are not zero, which any byte read outside a row (before its first element, where the
// zeros would read, or past its last) would bring into the output.
template <class T>
void check_zeros_then_even_rows() {
  constexpr auto e = static_cast<std::int64_t>(sizeof(T));
  constexpr std::size_t kGuard = 64;
  for (std::int64_t zeros = 0; zeros * e <= 80; zeros += zeros < 4 ? 1 : 3) {
    for (std::int64_t n = 0; n <= 140; n += n < 70 ? 1 : 7) {
      for (std::int64_t rows : {1, 3}) {
        const std::int64_t src_step = (2 * n + 3) * e, dst_step = (zeros + n + 2) * e;
        constexpr std::int64_t kMargin = 192;  // bytes before the first row and after the last
        std::vector<std::byte> buffer(static_cast<std::size_t>((rows - 1) * src_step + 2 * n * e + 2 * kMargin), std::byte{0xa5});
        std::byte* src = buffer.data() + kMargin;
        for (std::int64_t r = 0; r < rows; ++r) {
          for (std::int64_t i = 0; i < std::max<std::int64_t>(0, 2 * n - 1) * e; ++i)
            src[r * src_step + i] = static_cast<std::byte>((r * src_step + i) * 37 % 255 + 1);  // never 0
        }
        std::vector<std::byte> dst(static_cast<std::size_t>((rows - 1) * dst_step + (zeros + n) * e) + kGuard, std::byte{0x5a});
        zeros_then_even_rows<T>(dst.data(), dst_step, zeros, src, src_step, n, rows);
        const std::vector<std::byte> zero(sizeof(T));
        for (std::int64_t r = 0; r < rows; ++r) {
          const std::byte* row = dst.data() + r * dst_step;
          for (std::int64_t i = 0; i < zeros; ++i)
            ASSERT_EQ(std::memcmp(row + i * e, zero.data(), sizeof(T)), 0) << "zero " << i << " of " << zeros << ", n " << n << ", row " << r;
          for (std::int64_t i = 0; i < n; ++i)
            ASSERT_EQ(std::memcmp(row + (zeros + i) * e, src + r * src_step + 2 * i * e, sizeof(T)), 0)
                << "element " << i << " of " << n << " after " << zeros << " zeros, row " << r << ", width " << sizeof(T);
          const std::int64_t gap_end = r + 1 < rows ? (r + 1) * dst_step : static_cast<std::int64_t>(dst.size());
          for (std::int64_t b = r * dst_step + (zeros + n) * e; b < gap_end; ++b)
            ASSERT_EQ(dst[static_cast<std::size_t>(b)], std::byte{0x5a}) << "byte " << b << " past row " << r << ", n " << n << ", zeros " << zeros;
        }
      }
    }
  }
}

TEST(Rows, ZerosThenEveryOtherElementEveryLength) {
  check_zeros_then_even_rows<std::uint8_t>();
  check_zeros_then_even_rows<std::uint16_t>();
  check_zeros_then_even_rows<std::uint32_t>();
  check_zeros_then_even_rows<std::uint64_t>();
}

// tap_triple_rows (a stride-2 window 3 wide padded by one, its three taps at once): every width
// of input row against every output length through the byte permute's first, middle and last
// blocks (and the shorter rows it leaves to the loop), outputs reading past the row (end
// padding) zero, and nothing read outside a row or written past one. The bytes around the
// source rows are not zero, so a read outside a row would show in the output.
template <class T>
void check_tap_triple_rows() {
  constexpr auto e = static_cast<std::int64_t>(sizeof(T));
  constexpr std::int64_t kMargin = 192, kGap = 3;  // bytes around the source; elements between output rows
  for (std::int64_t in_width = 1; in_width <= 160; in_width += in_width < 40 ? 1 : 9) {
    for (std::int64_t n = 1; n <= 100; n += n < 40 ? 1 : 5) {
      const std::int64_t rows = 3, src_step = (in_width + 5) * e, dst_step = (n + kGap) * e;
      std::vector<std::byte> source(static_cast<std::size_t>(rows * src_step + 2 * kMargin));
      for (std::size_t i = 0; i < source.size(); ++i) source[i] = static_cast<std::byte>(i * 37 % 255 + 1);  // never 0
      const std::byte* src = source.data() + kMargin;
      std::vector<std::byte> out[3];
      std::byte* dst[3];
      for (int tap = 0; tap < 3; ++tap) {
        out[tap].assign(static_cast<std::size_t>(rows * dst_step), std::byte{0x5a});
        dst[tap] = out[tap].data();
      }
      tap_triple_rows<T>(dst, dst_step, src, src_step, in_width, n, rows);
      const std::vector<std::byte> zero(sizeof(T));
      for (int tap = 0; tap < 3; ++tap) {
        for (std::int64_t r = 0; r < rows; ++r) {
          const std::byte* row = out[tap].data() + r * dst_step;
          for (std::int64_t i = 0; i < n; ++i) {
            const std::int64_t at = 2 * i + tap - 1;
            const std::byte* want = at >= 0 && at < in_width ? src + r * src_step + at * e : zero.data();
            ASSERT_EQ(std::memcmp(row + i * e, want, sizeof(T)), 0)
                << "tap " << tap << " element " << i << " of " << n << ", row " << r << " of width " << in_width << ", size " << e;
          }
          for (std::int64_t b = n * e; b < dst_step; ++b)
            ASSERT_EQ(row[b], std::byte{0x5a}) << "tap " << tap << " byte " << b << " past row " << r << ", n " << n;
        }
      }
    }
  }
}

TEST(Rows, ThreeTapsOfAStrideTwoWindowAtOnceEveryLength) {
  check_tap_triple_rows<std::uint8_t>();
  check_tap_triple_rows<std::uint16_t>();
  check_tap_triple_rows<std::uint32_t>();
  check_tap_triple_rows<std::uint64_t>();
}

// repeat_contiguous (nearest upsampling by an integer factor): every element width and count,
// every length through whole 64-byte blocks and the masked last one of the byte permute (where
// the CPU has it; CTest runs this again with DMLOPS_DISABLE_AVX512=1), the compiled repeats of
// 2 to 4 and the fills past them; nothing past the output written.
template <class T>
void check_repeats() {
  constexpr int size = sizeof(T);
  for (std::int64_t k = 1; k <= kMaxRepeatVbmi + 1; ++k) {
    for (std::int64_t n = 0; n <= 150; ++n) {
      std::vector<std::byte> src(static_cast<std::size_t>(n * size));
      for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 29 + 3);
      std::vector<std::byte> dst(static_cast<std::size_t>(n * size * k + 64), std::byte{0x5a});
      repeat_contiguous<T>(dst.data(), src.data(), n, k);
      for (std::int64_t i = 0; i < n * k; ++i)
        ASSERT_EQ(std::memcmp(dst.data() + i * size, src.data() + i / k * size, static_cast<std::size_t>(size)), 0)
            << "output element " << i << ", n " << n << ", width " << size << ", k " << k;
      for (std::size_t b = static_cast<std::size_t>(n * size * k); b < dst.size(); ++b)
        ASSERT_EQ(dst[b], std::byte{0x5a}) << "byte " << b << " past the output, n " << n << ", width " << size << ", k " << k;
    }
  }
}

TEST(Rows, RepeatElementsEveryLengthWidthAndCount) {
  check_repeats<std::uint8_t>();
  check_repeats<std::uint16_t>();
  check_repeats<std::uint32_t>();
  check_repeats<std::uint64_t>();
}

// repeat_rows (the byte permute where the CPU has it; CTest runs this again with
// DMLOPS_DISABLE_AVX512=1, and then repeat_contiguous and copies): every element width and factor, lengths
// through whole 64-byte blocks and the masked last one, one to three copies of each row, rows
// taken in any order; each row and copy against a plain repeat, nothing written between or past
// them.
template <class T>
void check_repeat_rows() {
  constexpr int size = sizeof(T);
  for (int k = 2; k <= kMaxRepeatVbmi; ++k) {
    for (std::int64_t n : {1, 7, 15, 16, 17, 31, 32, 33, 64, 65, 100}) {
      for (std::int64_t copies : {1, 2, 3}) {
        const std::int64_t out_row = n * k * size, copy_stride = out_row + 8, row_step = copies * copy_stride + 24;
        constexpr int kRows = 3;
        std::vector<std::byte> src(static_cast<std::size_t>(kRows * n * size));
        for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 29 + 3);
        std::vector<std::byte> dst(static_cast<std::size_t>(kRows * row_step + 64), std::byte{0x5a});
        std::vector<std::byte> expected = dst;
        const std::array<int, kRows> order{2, 0, 1};  // output row r from input row order[r]
        std::array<std::byte*, kRows> outs{};
        std::array<const std::byte*, kRows> ins{};
        for (int r = 0; r < kRows; ++r) {
          outs[r] = dst.data() + r * row_step, ins[r] = src.data() + order[r] * n * size;
          for (std::int64_t j = 0; j < copies; ++j) {
            for (std::int64_t i = 0; i < n * k; ++i)
              std::memcpy(expected.data() + r * row_step + j * copy_stride + i * size, ins[r] + i / k * size, size);
          }
        }
        repeat_rows<T>(outs.data(), ins.data(), kRows, n, k, copies, copy_stride);
        ASSERT_EQ(dst, expected) << "n " << n << ", width " << size << ", k " << k << ", copies " << copies;
      }
    }
  }
}

TEST(Rows, RepeatRowsEveryLengthWidthCountAndCopies) {
  check_repeat_rows<std::uint8_t>();
  check_repeat_rows<std::uint16_t>();
  check_repeat_rows<std::uint32_t>();
  check_repeat_rows<std::uint64_t>();
}

// add_row (col2im's accumulation): steps 1 (the AVX2 loop where the CPU has it; CTest runs this
// again with DMLOPS_DISABLE_AVX2=1), 2 and 3, every length to 70, against a plain loop bit for
// bit, unsigned sums wrapping; the entries between and past the targets keep their values.
template <class Acc>
void check_add_row() {
  for (const std::int64_t step : {1, 2, 3}) {
    for (std::int64_t n = 0; n <= 70; ++n) {
      std::vector<Acc> src(static_cast<std::size_t>(n)), dst(static_cast<std::size_t>(n * step + 8)), expected;
      constexpr bool real = std::is_floating_point_v<Acc>;
      for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<Acc>(real ? 0.37 * double(i) - 9.1 : double(i * 37 + 200));
      for (std::size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<Acc>(real ? 1.0 / double(i + 3) : double(i * 91 + 100));
      expected = dst;
      for (std::int64_t j = 0; j < n; ++j) {
        const auto at = static_cast<std::size_t>(j * step);
        expected[at] = static_cast<Acc>(expected[at] + src[static_cast<std::size_t>(j)]);
      }
      add_row<Acc>(dst.data(), step, src.data(), n);
      ASSERT_EQ(std::memcmp(dst.data(), expected.data(), dst.size() * sizeof(Acc)), 0) << "step " << step << ", n " << n;
    }
  }
}

TEST(Rows, AddRowEveryStepAndLength) {
  check_add_row<float>();
  check_add_row<double>();
  check_add_row<std::uint8_t>();
  check_add_row<std::uint32_t>();
  check_add_row<std::uint64_t>();
}

// copy_bytes: every length through the short moves, the vector loop and its tails, at every
// alignment of source and destination, and one copy long enough to take the memcpy path;
// the bytes around the destination stay untouched.
TEST(Rows, CopyBytesEveryLengthAndAlignment) {
  std::vector<std::byte> src(600), dst(600);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 37 + 11);
  for (std::size_t n = 0; n <= 520; ++n) {
    for (std::size_t src_off : {0, 1, 7, 32, 33}) {
      for (std::size_t dst_off : {0, 3, 16, 31, 40}) {
        std::fill(dst.begin(), dst.end(), std::byte{0x5a});
        copy_bytes(dst.data() + dst_off, src.data() + src_off, n);
        for (std::size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= dst_off && i < dst_off + n;
          ASSERT_EQ(dst[i], inside ? src[i - dst_off + src_off] : std::byte{0x5a})
              << "byte " << i << " of a " << n << "-byte copy, offsets " << src_off << "/" << dst_off;
        }
      }
    }
  }
  const std::size_t big = (std::size_t{1} << 20) + 77;
  std::vector<std::byte> big_src(big), big_dst(big + 2, std::byte{0});
  for (std::size_t i = 0; i < big; ++i) big_src[i] = static_cast<std::byte>(i * 131 + 5);
  copy_bytes(big_dst.data() + 1, big_src.data(), big);
  EXPECT_EQ(std::memcmp(big_dst.data() + 1, big_src.data(), big), 0);
  EXPECT_EQ(big_dst[0], std::byte{0});
  EXPECT_EQ(big_dst[big + 1], std::byte{0});
}

// copy_byte_rows: rows of every length class (short moves, vector loop, tails), rows that lie
// back to back, apart and in reverse order, at misaligned addresses: each row is its source's
// bytes and nothing between or around the rows changes.
TEST(Rows, CopyByteRowsEveryLengthAndStep) {
  std::vector<std::byte> src(4096), dst(8192);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 53 + 7);
  for (std::size_t n : {0, 1, 3, 8, 31, 32, 33, 64, 65, 120, 127, 128, 200, 257}) {
    for (std::int64_t rows : {1, 2, 5}) {
      const auto sn = static_cast<std::int64_t>(n);
      for (const auto& [dst_step, src_step] : {std::pair<std::int64_t, std::int64_t>{sn, sn}, {sn + 9, sn + 40}, {-sn - 3, sn + 1}}) {
        std::fill(dst.begin(), dst.end(), std::byte{0x5a});
        std::byte* d = dst.data() + 3000 + 3;
        const std::byte* s = src.data() + 5;
        copy_byte_rows(d, dst_step, s, src_step, n, rows);
        std::vector<bool> written(dst.size(), false);
        for (std::int64_t r = 0; r < rows; ++r) {
          for (std::size_t i = 0; i < n; ++i) {
            const std::ptrdiff_t at = d + r * dst_step + static_cast<std::ptrdiff_t>(i) - dst.data();
            ASSERT_EQ(dst[static_cast<std::size_t>(at)], s[r * src_step + static_cast<std::int64_t>(i)])
                << "row " << r << " byte " << i << " of " << n << ", steps " << dst_step << "/" << src_step;
            written[static_cast<std::size_t>(at)] = true;
          }
        }
        for (std::size_t i = 0; i < dst.size(); ++i)
          ASSERT_TRUE(written[i] || dst[i] == std::byte{0x5a}) << "wrote outside the rows at byte " << i << " (n " << n << ")";
      }
    }
  }
}

// copy_framed_rows: every frame that has a loop of its own (one or two elements each side) and
// others, elements read from anywhere in their row or filled, copies short and long, input rows
// strided (forward, backward) or from offsets that repeat; each row against a plain reference, no
// byte written between or past the rows.
template <class T>
void check_framed_rows() {
  constexpr auto e = static_cast<std::int64_t>(sizeof(T));
  const T fill = static_cast<T>(0xA5C3E1F2B4D6978Bull);
  std::vector<std::byte> src(20480);  // seven rows of the longest (309 elements of 8 bytes) and more
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 29 + 3);
  for (const auto& [heads, tails] : {std::pair{1, 1}, {2, 2}, {0, 1}, {1, 0}, {0, 0}, {3, 1}, {5, 7}}) {
    for (std::int64_t n : {1, 7, 16, 33, 64, 65, 100, 300}) {  // elements copied
      const std::int64_t in_row = n + 9, out_row = heads + n + tails, gap = 5;  // in elements
      FramedRows frame;
      frame.heads = heads, frame.tails = tails, frame.copy_in = 4 * e, frame.copy_bytes = n * e;
      for (int i = 0; i < heads + tails; ++i)  // every third a fill, the others anywhere in the row
        frame.element_in[i] = i % 3 == 2 ? kFramedFill : (i * 5 + 1) % in_row * e;
      const std::int64_t rows = 6, out_step = (out_row + gap) * e;
      const std::vector<std::int64_t> offsets{3 * in_row * e, 0, 0, 5 * in_row * e, 2 * in_row * e, in_row * e};
      for (int layout = 0; layout < 3; ++layout) {  // offsets, forward steps, backward steps
        const std::byte* in = src.data() + (layout == 2 ? 6 * in_row * e : 0) + 1;
        const std::int64_t in_step = layout == 1 ? in_row * e : -in_row * e;
        std::vector<std::byte> dst(static_cast<std::size_t>(rows * out_step + 64), std::byte{0x5a});
        copy_framed_rows<T>(dst.data() + 2, out_step, in, layout == 0 ? offsets.data() : nullptr, in_step, rows, frame, fill);
        std::vector<std::byte> expected(dst.size(), std::byte{0x5a});
        for (std::int64_t r = 0; r < rows; ++r) {
          const std::byte* row = in + (layout == 0 ? offsets[static_cast<std::size_t>(r)] : r * in_step);
          std::byte* out = expected.data() + 2 + r * out_step;
          for (std::int64_t j = 0; j < out_row; ++j) {
            const bool element = j < heads || j >= heads + n;
            const int i = static_cast<int>(j < heads ? j : j - n);
            T value = fill;
            if (!element) std::memcpy(&value, row + 4 * e + (j - heads) * e, sizeof(T));
            else if (frame.element_in[i] != kFramedFill) std::memcpy(&value, row + frame.element_in[i], sizeof(T));
            std::memcpy(out + j * e, &value, sizeof(T));
          }
        }
        ASSERT_EQ(dst, expected) << "width " << e << ", " << heads << " + " << n << " + " << tails << ", layout " << layout;
      }
    }
  }
}

TEST(Rows, FramedRowsEveryFrameLengthAndLayout) {
  check_framed_rows<std::uint8_t>();
  check_framed_rows<std::uint16_t>();
  check_framed_rows<std::uint32_t>();
  check_framed_rows<std::uint64_t>();
}

// stream_bytes: lengths around its 4 KiB threshold and around whole cache lines, at every
// alignment of the destination within a line, each followed by stream_fence; the bytes around
// the destination stay untouched.
TEST(Rows, StreamBytesAroundTheThresholdAtEveryAlignment) {
  std::vector<std::byte> src(9000), dst(9100);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 37 + 11);
  for (std::size_t n : {0, 1, 63, 64, 255, 256, 4095, 4096, 4097, 4159, 4160, 4161, 8191, 8192, 8900}) {
    for (std::size_t dst_off = 0; dst_off < 64; dst_off += 3) {
      std::fill(dst.begin(), dst.end(), std::byte{0x5a});
      stream_bytes(dst.data() + dst_off, src.data() + 5, n);
      stream_fence();
      for (std::size_t i = 0; i < dst.size(); ++i) {
        const bool inside = i >= dst_off && i < dst_off + n;
        ASSERT_EQ(dst[i], inside ? src[i - dst_off + 5] : std::byte{0x5a})
            << "byte " << i << " of a " << n << "-byte streamed copy at offset " << dst_off;
      }
    }
  }
}

// Whether an output several times its input streams depends on its size against the
// last-level cache (staged_cache_bytes: on Zen 4 also on the thread count).
TEST(Rows, StreamStagedPastTheStagedShareOfTheCache) {
  for (int threads : {1, 2, 7, 64}) {
    const testing::ThreadCountGuard guard(threads);
    const std::int64_t most = staged_cache_bytes();
#if DMLOPS_X86
    EXPECT_TRUE(stream_staged(most / 5, most - most / 5 + 1)) << threads;  // past that share of the cache
    EXPECT_FALSE(stream_staged(most / 5, most - most / 5)) << threads;     // within it
    EXPECT_FALSE(stream_staged(most, most)) << threads;                    // not twice the input
#else
    EXPECT_FALSE(stream_staged(most / 5, 4 * most)) << threads;  // Arm's stores need no streaming
#endif
  }
}

// The cache the streaming decisions count: the L3, or 32 L2s where the L3 holds over 64 (a
// many-core socket's); an output past it streams.
TEST(Rows, StreamingCountsAtMost32L2sOfAManyCoreL3) {
  constexpr std::int64_t K = 1024, M = 1024 * K;
  EXPECT_EQ(streaming_cache_bytes({48 * K, 2 * M, 300 * M}), 64 * M);  // the 16-core Xeon VM
  EXPECT_EQ(streaming_cache_bytes({48 * K, 1 * M, 32 * M}), 32 * M);   // Zen 4 and 5
  EXPECT_EQ(streaming_cache_bytes({32 * K, M / 2, 32 * M}), 32 * M);   // Zen 3
  EXPECT_EQ(streaming_cache_bytes({48 * K, 2 * M, 128 * M}), 128 * M);  // 64 L2s: whole
  const std::int64_t expected = streaming_cache_bytes(platform::cache_sizes());
  EXPECT_EQ(streaming_cache_bytes(), expected);
#if DMLOPS_X86
  EXPECT_TRUE(stream_output(expected + 1));
  EXPECT_FALSE(stream_output(expected));
#endif
}

// Staged outputs stream past three quarters of the cache the streaming decisions count,
// but three eighths on one thread of a Zen 4, whose L3 kept less of an output written by one core
// (see staged_cache_bytes).
TEST(Rows, StagedOutputsStreamPastAShareOfTheCacheThatDependsOnTheCpu) {
  constexpr std::int64_t K = 1024, M = 1024 * K;
  for (int threads : {1, 2, 16}) {
    EXPECT_EQ(staged_cache_bytes({48 * K, 1 * M, 32 * M}, false, threads), 24 * M);   // Zen 5
    EXPECT_EQ(staged_cache_bytes({48 * K, 2 * M, 300 * M}, false, threads), 48 * M);  // the 16-core Xeon VM
  }
  EXPECT_EQ(staged_cache_bytes({32 * K, 1 * M, 32 * M}, true, 1), 12 * M);  // Zen 4
  EXPECT_EQ(staged_cache_bytes({32 * K, 1 * M, 32 * M}, true, 2), 24 * M);
  EXPECT_EQ(staged_cache_bytes({32 * K, 1 * M, 32 * M}, true, 16), 24 * M);
  for (int threads : {1, 3}) {
    const testing::ThreadCountGuard guard(threads);
    EXPECT_EQ(staged_cache_bytes(), staged_cache_bytes(platform::cache_sizes(), platform::cpu_features().zen4, threads));
  }
}

// LineStreamer: sequences of writes of 0 to 200 bytes that continue each other (so lines are
// completed across writes), with gaps between some (a stretch ends: its waiting bytes go out
// with ordinary stores), starting at every alignment within a line; after finish() every byte
// written holds its source byte and every byte around or between the writes is untouched.
TEST(Rows, LineStreamerWritesWholeLinesAcrossWritesAndGaps) {
  std::vector<std::byte> src(4096), dst(8192 + 128);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 37 + 11);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> length(0, 200), gap(0, 3), chance(0, 2);
  for (std::size_t start = 0; start < 64; ++start) {
    for (int trial = 0; trial < 8; ++trial) {
      std::fill(dst.begin(), dst.end(), std::byte{0x5a});
      std::vector<bool> written(dst.size(), false);
      std::vector<std::byte> expected(dst.size(), std::byte{0x5a});
      {
        LineStreamer streamer;
        std::size_t at = 64 + start, from = 0;
        while (true) {
          const auto n = static_cast<std::size_t>(length(rng));
          if (at + n > dst.size() - 64 || from + n > src.size()) break;
          streamer.write(dst.data() + at, src.data() + from, n);
          for (std::size_t i = 0; i < n; ++i) expected[at + i] = src[from + i], written[at + i] = true;
          at += n, from += n;
          if (chance(rng) == 0) at += static_cast<std::size_t>(gap(rng));  // a gap of 0 to 3 bytes
          if (trial % 2 == 1 && chance(rng) == 0) streamer.finish();       // an explicit end
        }
        if (trial % 4 < 2) streamer.finish();  // else the destructor finishes
      }
      for (std::size_t i = 0; i < dst.size(); ++i)
        ASSERT_EQ(dst[i], expected[i]) << "byte " << i << (written[i] ? " (written)" : " (untouched)") << ", start "
                                       << start << ", trial " << trial;
    }
  }
}

// LineAssembler: one stretch starting at every alignment within a line, made of copies (0 to
// 200 bytes, single or as copy_rows with 0 to 70 zero bytes between rows, rows from a source
// step that may be negative) and zero runs, some finish() calls in between; after finish() every
// byte of the stretch holds what was appended and every byte around it is untouched. The
// source is read only where the pieces lie (its bytes around them are never needed).
TEST(Rows, LineAssemblerWritesPiecesAndZerosInOrder) {
  std::vector<std::byte> src(8192), dst(16384 + 128);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 37 + 11);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> length(0, 200), gap(0, 70), rows(1, 5), kind(0, 5);
  for (std::size_t start = 0; start < 64; ++start) {
    for (int trial = 0; trial < 6; ++trial) {
      std::fill(dst.begin(), dst.end(), std::byte{0x5a});
      std::vector<std::byte> expected(dst.size(), std::byte{0x5a});
      std::size_t at = 64 + start;
      {
        LineAssembler lines(dst.data() + at);
        while (true) {
          const int what = kind(rng);
          if (what == 0) {  // zeros
            const auto n = static_cast<std::size_t>(length(rng));
            if (at + n > dst.size() - 64) break;
            lines.zeros(n);
            std::fill_n(expected.begin() + static_cast<std::ptrdiff_t>(at), n, std::byte{0});
            at += n;
          } else if (what == 1) {
            lines.finish();
          } else {  // rows of n bytes, `between` zeros between two, the source `step` apart
            const auto n = static_cast<std::size_t>(length(rng)), between = static_cast<std::size_t>(gap(rng));
            const std::int64_t count = what == 2 ? rows(rng) : 1, step = (what == 3 ? -1 : 1) * (length(rng) + 1);
            const std::size_t total = count * n + (count - 1) * between;
            if (at + total > dst.size() - 64) break;
            const std::int64_t first = step < 0 ? 4096 : 512;  // rows within src either way
            lines.copy_rows(src.data() + first, step, n, count, between);
            for (std::int64_t r = 0; r < count; ++r) {
              if (r > 0) std::fill_n(expected.begin() + static_cast<std::ptrdiff_t>(at), between, std::byte{0}), at += between;
              std::copy_n(src.begin() + first + r * step, n, expected.begin() + static_cast<std::ptrdiff_t>(at));
              at += n;
            }
          }
        }
        if (trial % 2 == 0) lines.finish();  // else the destructor finishes
      }
      stream_fence();
      for (std::size_t i = 0; i < dst.size(); ++i)
        ASSERT_EQ(dst[i], expected[i]) << "byte " << i << ", start " << start << ", trial " << trial << ", end " << at;
    }
  }
}

// gemm_packed against a plain triple loop in double: every tile edge (M, N around the tile
// sizes, M across row blocks of A), K from 1 up and across K blocks; B packed row by row; both
// element types. The micro-kernel writes whole tiles, so C has round_up(M, kGemmRows) rows;
// only the first M are compared. gemm_pack_a_inline must give gemm_packed's bits.
template <class Acc>
void check_gemm() {
  constexpr std::int64_t NR = gemm_columns<Acc>();
  std::mt19937 rng(99);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  for (std::int64_t M : {1, 5, 6, 7, 13, 257}) {  // 257: several row blocks of A
    for (std::int64_t N : {NR, 2 * NR, 5 * NR}) {
      for (std::int64_t K : {std::int64_t{1}, std::int64_t{2}, std::int64_t{9}, std::int64_t{70}, kGemmDepth, kGemmDepth + 3, 2 * kGemmDepth + 1}) {
        std::vector<Acc> a(static_cast<std::size_t>(M * K)), b(static_cast<std::size_t>(K * (N + 3)));
        for (Acc& v : a) v = static_cast<Acc>(value(rng));
        for (Acc& v : b) v = static_cast<Acc>(value(rng));
        std::vector<Acc> packed(static_cast<std::size_t>(round_up(M, kGemmRows) * K));
        pack_gemm_a(M, K, [&](std::int64_t i, std::int64_t k) { return a[static_cast<std::size_t>(i * K + k)]; },
                    packed.data());
        std::vector<Acc> b_packed(static_cast<std::size_t>(K * N));
        for (std::int64_t k = 0; k < K; ++k) pack_gemm_b_row(b_packed.data(), K, k, b.data() + k * (N + 3), N);
        const std::int64_t ldc = N + 1;
        std::vector<Acc> c(static_cast<std::size_t>(round_up(M, kGemmRows) * ldc));
        gemm_packed(round_up(M, kGemmRows), N, K, packed.data(), b_packed.data(), c.data(), ldc);
        // A packed block by block inside the product (pack_gemm_a of the block's rows and columns).
        std::vector<Acc> c_inline_a(c.size());
        const GemmPackA<Acc> pack_a = [&](std::int64_t k0, std::int64_t depth, std::int64_t m0, std::int64_t rows, Acc* dst) {
          pack_gemm_a(std::min(rows, M - m0), depth,
                      [&](std::int64_t i, std::int64_t k) { return a[static_cast<std::size_t>((m0 + i) * K + k0 + k)]; }, dst);
        };
        gemm_pack_a_inline(round_up(M, kGemmRows), N, K, pack_a, b_packed.data(), c_inline_a.data(), ldc);
        // With an epilogue, each driver gives the sums plus the row's bias (the one addition
        // after the last K block), then relu: exactly what a pass over c would give.
        std::vector<Acc> bias(static_cast<std::size_t>(round_up(M, kGemmRows)));
        for (Acc& v : bias) v = static_cast<Acc>(value(rng));
        std::vector<Acc> c_bias(c.size()), c_bias_inline_a(c.size());
        for (const GemmEpilogue<Acc> epilogue : {GemmEpilogue<Acc>{bias.data(), false}, GemmEpilogue<Acc>{bias.data(), true},
                                                 GemmEpilogue<Acc>{nullptr, true}}) {
          gemm_packed(round_up(M, kGemmRows), N, K, packed.data(), b_packed.data(), c_bias.data(), ldc, epilogue);
          gemm_pack_a_inline(round_up(M, kGemmRows), N, K, pack_a, b_packed.data(), c_bias_inline_a.data(), ldc, epilogue);
          std::int64_t clamped = 0;
          for (std::int64_t i = 0; i < M; ++i) {
            for (std::int64_t j = 0; j < N; ++j) {
              const std::size_t at = static_cast<std::size_t>(i * ldc + j);
              Acc expected = epilogue.bias ? c[at] + bias[static_cast<std::size_t>(i)] : c[at];
              if (epilogue.relu) {
                clamped += expected <= Acc(0);
                expected = expected > Acc(0) ? expected : Acc(0);
              }
              ASSERT_EQ(c_bias[at], expected) << "epilogue " << (epilogue.bias != nullptr) << epilogue.relu << ", M " << M
                                              << " N " << N << " K " << K << " at " << i << ", " << j;
              ASSERT_EQ(c_bias_inline_a[at], expected) << "epilogue, inline A, M " << M << " N " << N << " K " << K;
            }
          }
          if (epilogue.relu && M * N >= 64) {
            EXPECT_GT(clamped, 0) << "the relu clamped nothing: M " << M << " N " << N;
          }
        }
        for (std::int64_t i = 0; i < M; ++i) {
          for (std::int64_t j = 0; j < N; ++j) {
            ASSERT_EQ(c_inline_a[static_cast<std::size_t>(i * ldc + j)], c[static_cast<std::size_t>(i * ldc + j)])
                << "inline A, M " << M << " N " << N << " K " << K << " at " << i << ", " << j;
          }
        }
        for (std::int64_t i = 0; i < M; ++i) {
          for (std::int64_t j = 0; j < N; ++j) {
            double exact = 0, magnitude = 0;
            for (std::int64_t k = 0; k < K; ++k) {
              const double term = double(a[static_cast<std::size_t>(i * K + k)]) * double(b[static_cast<std::size_t>(k * (N + 3) + j)]);
              exact += term;
              magnitude += std::abs(term);
            }
            const double eps = std::numeric_limits<Acc>::epsilon();
            ASSERT_NEAR(double(c[static_cast<std::size_t>(i * ldc + j)]), exact, 2 * (K + 1) * eps * magnitude + 1e-300)
                << "M " << M << " N " << N << " K " << K << " at " << i << ", " << j;
          }
        }
      }
    }
  }
}

// weighted_row_sum against double sums: every vector tail (n around 8 and 32), several tap
// counts, rows at odd offsets of one buffer (unaligned, overlapping like a convolution's taps);
// and bit for bit against one chain per output from zero in increasing t, fused with AVX2+FMA
// (as the GEMM's and the depthwise lanes', float64 too), else rounded apart.
template <class Acc>
void check_weighted_row_sum() {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  std::vector<Acc> source(200);
  for (Acc& v : source) v = static_cast<Acc>(value(rng));
  for (std::int64_t taps : {1, 3, 9}) {
    std::vector<Acc> weights(static_cast<std::size_t>(taps));
    std::vector<const Acc*> rows;
    for (std::int64_t t = 0; t < taps; ++t) {
      weights[static_cast<std::size_t>(t)] = static_cast<Acc>(value(rng));
      rows.push_back(source.data() + 1 + 5 * t);
    }
    for (std::int64_t n : {0, 1, 7, 8, 9, 31, 32, 33, 70, 150}) {
      std::vector<Acc> out(static_cast<std::size_t>(n) + 1, Acc(42));
      weighted_row_sum(taps, rows.data(), weights.data(), n, out.data());
      for (std::int64_t j = 0; j < n; ++j) {
        double exact = 0, magnitude = 0;
        for (std::int64_t t = 0; t < taps; ++t) {
          const double term = double(weights[static_cast<std::size_t>(t)]) * double(rows[static_cast<std::size_t>(t)][j]);
          exact += term;
          magnitude += std::abs(term);
        }
        ASSERT_NEAR(double(out[static_cast<std::size_t>(j)]), exact,
                    2 * (taps + 1) * std::numeric_limits<Acc>::epsilon() * magnitude + 1e-300)
            << "taps " << taps << " n " << n << " at " << j;
        Acc chain = 0;
        for (std::int64_t t = 0; t < taps; ++t) {
          const Acc w = weights[static_cast<std::size_t>(t)], x = rows[static_cast<std::size_t>(t)][j];
          if (avx2_fma_enabled()) {
            if constexpr (std::is_same_v<Acc, float>) chain = testing::fma_float(w, x, chain);
            else chain = testing::fma_double(w, x, chain);
          } else {
            const Acc product = w * x;
            chain += product;
          }
        }
        ASSERT_EQ(out[static_cast<std::size_t>(j)], chain) << "not one chain: taps " << taps << " n " << n << " at " << j;
      }
      EXPECT_EQ(out[static_cast<std::size_t>(n)], Acc(42)) << "wrote past n = " << n;
    }
  }
}

// pack_gemm_b_gather against gemm_b_offset, exactly: micro-panels made of one full piece (the
// fixed-size copies: a run of two that follow each other in their rows, then one that does not
// follow), of several pieces, of a partial piece and uncovered (zero) columns, and a tail panel;
// K rows from distinct, unaligned source rows; from column 0 and from a later micro-panel.
template <class Acc>
void check_gemm_b_gather() {
  constexpr std::int64_t NR = gemm_columns<Acc>();
  std::vector<Acc> storage(4000);
  for (std::size_t i = 0; i < storage.size(); ++i) storage[i] = static_cast<Acc>(i + 1);
  // Columns: [0, 2NR) one piece each, the second following the first; [2NR, 3NR) one piece
  // elsewhere; [3NR, 4NR) three pieces; [4NR, 5NR) a piece and a gap; [5NR, 6NR) a short piece
  // then zeros to the end.
  const std::vector<GemmPiece> pieces = {{0, 3, NR},          {NR, 3 + NR, NR},        {2 * NR, 200, NR},
                                         {3 * NR, 40, 5},     {3 * NR + 5, 7, 1},      {3 * NR + 6, 90, NR - 6},
                                         {4 * NR, 11, NR - 3}, {5 * NR, 60, 2}};
  // K source rows 37 values apart, and the packed B that `pieces` say (zeros where none is).
  const auto sources = [&](std::int64_t K) {
    std::vector<const Acc*> source;
    for (std::int64_t k = 0; k < K; ++k) source.push_back(storage.data() + 1 + 37 * k);
    return source;
  };
  const auto expected_b = [](const std::vector<const Acc*>& source, const std::vector<GemmPiece>& layout, std::int64_t N) {
    const std::int64_t K = std::ssize(source);
    std::vector<Acc> expected(static_cast<std::size_t>(K * N), Acc(0));
    for (const GemmPiece& piece : layout) {
      for (std::int64_t k = 0; k < K; ++k) {
        for (std::int64_t j = 0; j < piece.length; ++j)
          expected[static_cast<std::size_t>(gemm_b_offset<Acc>(K, k, piece.column + j))] = source[k][piece.offset + j];
      }
    }
    return expected;
  };
  const std::int64_t N = 6 * NR;
  for (std::int64_t K : {1, 3, 10}) {
    const std::vector<const Acc*> source = sources(K);
    const std::vector<Acc> expected = expected_b(source, pieces, N);
    std::vector<Acc> b(expected.size(), Acc(-1));
    pack_gemm_b_gather(K, source.data(), pieces.data(), std::ssize(pieces), 0, N, b.data());
    EXPECT_EQ(b, expected) << "K " << K;
    // Columns [NR, N) alone: micro-panel q of the result is micro-panel q + 1 of the whole.
    std::vector<Acc> tail(static_cast<std::size_t>(K * (N - NR)), Acc(-1));
    pack_gemm_b_gather(K, source.data(), pieces.data() + 1, std::ssize(pieces) - 1, NR, N - NR, tail.data());
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), expected.begin() + K * NR)) << "K " << K << " from column " << NR;
  }
  // A run of 19 micro-panels, each one piece following the last (a pointwise layer's rows), copied
  // in chunks of a few micro-panels; then one piece elsewhere.
  std::vector<GemmPiece> run;
  for (std::int64_t q = 0; q < 19; ++q) run.push_back({q * NR, 500 + q * NR, NR});
  run.push_back({19 * NR, 100, NR});
  for (std::int64_t K : {1, 3, 10}) {
    const std::vector<const Acc*> source = sources(K);
    const std::vector<Acc> expected = expected_b(source, run, 20 * NR);
    std::vector<Acc> b(expected.size(), Acc(-1));
    pack_gemm_b_gather(K, source.data(), run.data(), std::ssize(run), 0, 20 * NR, b.data());
    EXPECT_EQ(b, expected) << "a run of 19, K " << K;
  }
}

// Scratch blocks: aligned, reused by the next request that fits (the same memory, no new
// allocation), several alive at once are distinct, and the per-thread cache stays under its cap.
TEST(Scratch, ReusesBlocksWithinTheCap) {
  std::thread([] {  // a fresh thread: an empty cache
    EXPECT_EQ(scratch_cached_bytes(), 0u);
    float* first;
    {
      const Scratch<float> a(1000);
      first = a.get();
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first) % 64, 0u);
      std::fill_n(a.get(), 1000, 1.0f);
    }
    EXPECT_EQ(scratch_cached_bytes(), 4000u);
    {
      const Scratch<float> b(900), c(900);  // b takes the cached block, c a new one
      EXPECT_EQ(b.get(), first);
      EXPECT_NE(c.get(), first);
      EXPECT_EQ(scratch_cached_bytes(), 0u);
    }
    EXPECT_EQ(scratch_cached_bytes(), 4000u + 3600u);
    {
      const Scratch<std::byte> huge(static_cast<std::int64_t>(kScratchCacheBytes) + 1);  // never cached
      huge.get()[0] = std::byte{1};
    }
    EXPECT_EQ(scratch_cached_bytes(), 4000u + 3600u);
    {
      const Scratch<std::byte> big(static_cast<std::int64_t>(kScratchCacheBytes) - 100);  // cached, evicting smaller ones
    }
    EXPECT_LE(scratch_cached_bytes(), kScratchCacheBytes);
    EXPECT_EQ(scratch_cached_bytes(), kScratchCacheBytes - 100);
  }).join();
}

TEST(Scratch, AThreadsCacheIsFreedWhenItExits) {
  // Its blocks go with it (the cache is handed to a thread-exit hook, not left to a thread_local
  // destructor, which MinGW's emulated TLS can run on freed storage).
  const std::size_t before = scratch_thread_caches();
  for (int round = 0; round < 3; ++round) {
    std::thread([before] {
      { const Scratch<float> block(1 << 16); }
      EXPECT_EQ(scratch_cached_bytes(), std::size_t{4} << 16);
      EXPECT_EQ(scratch_thread_caches(), before + 1);
    }).join();
    EXPECT_EQ(scratch_thread_caches(), before) << "round " << round;
  }
}

// interleave_lanes / deinterleave_lanes against the index formulas, exactly: every lane count
// 1..L (block tails: the unused lanes read 0 and are never written), column counts around the
// 8 x 8 blocks, unit-stride rows (transposed), channels-last columns (lane stride 1), other
// and negative strides, strided columns (transposed through a block, then stored along rows).
template <class Acc>
void check_interleave() {
  const std::int64_t L = lane_count<Acc>();
  std::vector<Acc> storage(6000);
  for (std::size_t i = 0; i < storage.size(); ++i) storage[i] = static_cast<Acc>(i + 1);
  struct Strides {
    std::int64_t lane, column;
  };
  for (const Strides st : {Strides{40, 1}, Strides{1, 20}, Strides{3, 60}, Strides{-41, 1}, Strides{45, -1},
                          Strides{70, 2}, Strides{-101, -3}}) {
    for (std::int64_t used = 1; used <= L; ++used) {
      for (std::int64_t n : {1, 7, 8, 9, 16, 17, 33}) {
        // The element (lane l, column x) in the middle of the storage, so negative strides stay inside.
        const std::int64_t origin = 3000;
        const auto at = [&](std::int64_t l, std::int64_t x) { return origin + l * st.lane + x * st.column; };
        std::vector<Acc> block(static_cast<std::size_t>(n * L + 1), Acc(-7));
        interleave_lanes(storage.data() + origin, st.lane, st.column, used, n, block.data());
        for (std::int64_t x = 0; x < n; ++x) {
          for (std::int64_t l = 0; l < L; ++l) {
            const Acc expected = l < used ? storage[static_cast<std::size_t>(at(l, x))] : Acc(0);
            ASSERT_EQ(block[static_cast<std::size_t>(x * L + l)], expected)
                << "interleave strides " << st.lane << ", " << st.column << " used " << used << " n " << n << " at " << x << ", " << l;
          }
        }
        EXPECT_EQ(block.back(), Acc(-7)) << "interleave wrote past n = " << n;
        // Back from positions `src_stride` apart: one block (L), or one of several side by side.
        for (const std::int64_t src_stride : {L, 3 * L}) {
          std::vector<Acc> wide(static_cast<std::size_t>(n * src_stride));
          for (std::size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<Acc>(-1 - static_cast<double>(i));
          std::vector<Acc> rows(storage.size(), Acc(0));
          deinterleave_lanes(wide.data(), src_stride, n, used, rows.data() + origin, st.lane, st.column);
          std::int64_t written = 0;
          for (Acc v : rows) written += v != Acc(0);
          EXPECT_EQ(written, used * n) << "deinterleave wrote outside its lanes";
          for (std::int64_t x = 0; x < n; ++x) {
            for (std::int64_t l = 0; l < used; ++l) {
              ASSERT_EQ(rows[static_cast<std::size_t>(at(l, x))], wide[static_cast<std::size_t>(x * src_stride + l)])
                  << "deinterleave strides " << st.lane << ", " << st.column << " src_stride " << src_stride << " used "
                  << used << " n " << n << " at " << x << ", " << l;
            }
          }
        }
      }
    }
  }
}

// lane_window_sum against double sums of the same terms: output counts below, at and around
// the 8-output block (the last block overlapping the one before), 1 to 27 taps at scattered
// offsets, with and without a bias.
template <class Acc>
void check_lane_window_sum() {
  const std::int64_t L = lane_count<Acc>();
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  std::vector<Acc> base(static_cast<std::size_t>(400 * L));
  for (Acc& v : base) v = static_cast<Acc>(value(rng));
  for (std::int64_t taps : {1, 9, 27}) {
    std::vector<std::int64_t> tap_offsets;
    std::vector<Acc> weights(static_cast<std::size_t>(taps * L)), bias(static_cast<std::size_t>(L));
    for (std::int64_t t = 0; t < taps; ++t) tap_offsets.push_back((t * 7 % 29) * L);
    for (Acc& v : weights) v = static_cast<Acc>(value(rng));
    for (Acc& v : bias) v = static_cast<Acc>(value(rng));
    for (std::int64_t n : {1, 5, 7, 8, 9, 15, 16, 21, 49}) {
      std::vector<std::int64_t> positions;
      for (std::int64_t p = 0; p < n; ++p) positions.push_back((p * 3 + p / 5 * 11) * L);
      for (bool with_bias : {false, true}) {
        std::vector<Acc> out(static_cast<std::size_t>(n * L + 1), Acc(42));
        lane_window_sum(taps, base.data(), tap_offsets.data(), positions.data(), n, weights.data(),
                        with_bias ? bias.data() : nullptr, out.data());
        for (std::int64_t p = 0; p < n; ++p) {
          for (std::int64_t l = 0; l < L; ++l) {
            double exact = with_bias ? double(bias[static_cast<std::size_t>(l)]) : 0.0, magnitude = std::abs(exact);
            for (std::int64_t t = 0; t < taps; ++t) {
              const double term = double(weights[static_cast<std::size_t>(t * L + l)]) *
                                  double(base[static_cast<std::size_t>(positions[static_cast<std::size_t>(p)] + tap_offsets[static_cast<std::size_t>(t)] + l)]);
              exact += term;
              magnitude += std::abs(term);
            }
            ASSERT_NEAR(double(out[static_cast<std::size_t>(p * L + l)]), exact,
                        2 * (taps + 2) * std::numeric_limits<Acc>::epsilon() * magnitude)
                << "taps " << taps << " n " << n << " bias " << with_bias << " at " << p << ", " << l;
          }
        }
        EXPECT_EQ(out.back(), Acc(42)) << "wrote past n = " << n;
      }
    }
  }
}

TEST(Lanes, CountFollowsTheVectorKernels) {
  EXPECT_EQ(lane_count<float>(), avx512_enabled() ? 16 : 8);
  EXPECT_EQ(lane_count<double>(), avx512_enabled() ? 8 : 4);
}

TEST(Lanes, InterleaveAndDeinterleaveMatchTheLayout) {
  check_interleave<float>();
  check_interleave<double>();
}

TEST(Lanes, WindowSumMatchesPlainLoops) {
  check_lane_window_sum<float>();
  check_lane_window_sum<double>();
}

// ---------------------------------------------------------------------------------------------
// direct_window_product / pack_direct_filter (core/direct.hpp): the engine of the direct
// forward convolution.

// A direct_window_product call over random data: `channels` sources at distinct, unaligned,
// overlapping places of one buffer (as a padded plane's channels and rows are), `taps` tap
// offsets and n window offsets, a random filter of width = vectors * L. The offsets are
// scattered and not increasing (as rows of a tile can be), or with `row` > 0 rows of `row`
// positions `step` elements apart, each row 5 elements past the last one's end (a padded
// plane's output rows, which tiles of 12 positions are cut at to be row tiles). With `triples`
// the taps lie in rows of three adjacent ones, 23 elements apart (an undilated 3x3 window's, in
// a padded plane 23 wide), which tiles of 6 (AVX2) take the triple tiles for.
struct DirectCase {
  std::int64_t channels, taps, vectors, width;
  std::vector<float> storage, filter;
  std::vector<const float*> sources;
  std::vector<std::int64_t> tap_offsets, offsets;

  DirectCase(std::int64_t channels_, std::int64_t taps_, std::int64_t vectors_, std::int64_t n, std::mt19937& rng,
             std::int64_t row = 0, std::int64_t step = 1, bool triples = false)
      : channels(channels_), taps(taps_), vectors(vectors_), width(vectors_ * simd_lanes<float>()) {
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    for (std::int64_t t = 0; t < taps; ++t) tap_offsets.push_back(triples ? t / 3 * 23 + t % 3 : t * 7 % 31 + t / 3);
    for (std::int64_t p = 0; p < std::max<std::int64_t>(n, 1); ++p)
      offsets.push_back(row > 0 ? p / row * (row * step + 5) + p % row * step : p * 11 % (2 * n + 1));
    const std::int64_t reach = *std::max_element(tap_offsets.begin(), tap_offsets.end()) +
                               *std::max_element(offsets.begin(), offsets.end()) + 1;
    storage.resize(static_cast<std::size_t>(channels * 13 + 1 + reach));
    for (float& v : storage) v = value(rng);
    for (std::int64_t c = 0; c < channels; ++c) sources.push_back(storage.data() + 1 + c * 13);
    filter.resize(static_cast<std::size_t>(channels * taps * width));
    for (float& v : filter) v = value(rng);
  }
  float source(std::int64_t c, std::int64_t t, std::int64_t p) const {
    return sources[static_cast<std::size_t>(c)][offsets[static_cast<std::size_t>(p)] + tap_offsets[static_cast<std::size_t>(t)]];
  }
  float weight(std::int64_t c, std::int64_t t, std::int64_t o) const {
    return filter[static_cast<std::size_t>((c * taps + t) * width + o)];
  }
};

// Against double sums of the same terms: 1, 2 and direct_vectors() weight vectors, every n up
// to 30 (every tile size and every split of n into tiles, with 6 or 12 positions per tile), channel and tap counts from 1 to 20 and 27, from zero or
// added onto out (accumulate). One FMA chain per output: within a few ulps of the sum of
// |terms|. The entries past n * width are never written.
TEST(Direct, WindowProductMatchesDoubleSums) {
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const float sentinel = -1234.5f;
  const std::vector<std::int64_t> vector_counts = {1, 2, direct_vectors()};
  for (const std::int64_t vectors : vector_counts) {
    for (const std::int64_t channels : {1, 2, 3, 8, 13, 20}) {
      for (const std::int64_t taps : {1, 3, 9, 27}) {
        for (std::int64_t n = 1; n <= 30; ++n) {
          const DirectCase dc(channels, taps, vectors, n, rng);
          const std::int64_t width = dc.width;
          for (const bool accumulate : {false, true}) {
            std::vector<float> out(static_cast<std::size_t>((n + 1) * width), sentinel), initial;
            for (std::int64_t i = 0; i < n * width; ++i) out[static_cast<std::size_t>(i)] = value(rng);
            initial = out;
            direct_window_product(channels, taps, dc.sources.data(), dc.tap_offsets.data(), dc.offsets.data(), n, vectors,
                                  dc.filter.data(), DirectSums{accumulate}, out.data());
            for (std::int64_t p = 0; p < n; ++p) {
              for (std::int64_t o = 0; o < width; ++o) {
                const std::size_t at = static_cast<std::size_t>(p * width + o);
                double exact = accumulate ? double(initial[at]) : 0.0, magnitude = std::abs(exact);
                for (std::int64_t c = 0; c < channels; ++c) {
                  for (std::int64_t t = 0; t < taps; ++t) {
                    const double term = double(dc.source(c, t, p)) * double(dc.weight(c, t, o));
                    exact += term;
                    magnitude += std::abs(term);
                  }
                }
                ASSERT_NEAR(double(out[at]), exact,
                            2 * (channels * taps + 2) * double(std::numeric_limits<float>::epsilon()) * magnitude)
                    << "vectors " << vectors << " channels " << channels << " taps " << taps << " n " << n
                    << " accumulate " << accumulate << " at " << p << ", " << o;
              }
            }
            for (std::size_t i = static_cast<std::size_t>(n * width); i < out.size(); ++i)
              ASSERT_EQ(out[i], sentinel) << "wrote past n * width: vectors " << vectors << " n " << n << " at " << i;
          }
        }
      }
    }
  }
  // n <= 0 writes nothing.
  const DirectCase dc(3, 3, 1, 1, rng);
  std::vector<float> out(static_cast<std::size_t>(dc.width), sentinel);
  direct_window_product(3, 3, dc.sources.data(), dc.tap_offsets.data(), dc.offsets.data(), 0, 1, dc.filter.data(),
                        DirectSums{}, out.data());
  EXPECT_EQ(out, std::vector<float>(out.size(), sentinel));
}

// The promise of direct.hpp: every output is one chain in increasing (c, t), from zero or from
// out, so its bits are a plain loop's: one fused multiply-add per term with AVX2 or AVX-512 (the im2col
// GEMM's chain), a rounded product then a rounded sum on the portable kernel. Hence also
// splitting the channels into passes (the later ones accumulating, as the direct convolution algorithm does when
// a layer's filter outgrows L1) changes no bit. A bias and a relu (DirectSums), asked of the
// whole call or of the last pass, give the bits of the chain plus bias[o], then x > 0 ? x : 0.
// Positions in rows (row > 0, `step` apart) take the row tiles (and with `triples`, the triple
// tiles), others the general ones.
void expect_one_chain_per_output(std::int64_t row, std::int64_t step, bool triples = false) {
  std::mt19937 rng(43);
  const bool fused = avx2_fma_enabled();
  const std::vector<std::int64_t> vector_counts = {1, 2, direct_vectors()};
  for (const std::int64_t vectors : vector_counts) {
    for (const std::int64_t channels : {1, 5, 16}) {
      for (const std::int64_t taps : {1, 9}) {
        for (const std::int64_t n : {1, 6, 7, 12, 13, 25, 49}) {
          const DirectCase dc(channels, taps, vectors, n, rng, row, step, triples);
          const std::int64_t width = dc.width;
          std::vector<float> bias(static_cast<std::size_t>(width));
          for (float& b : bias) b = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
          // Without an epilogue, with a bias, with a bias and a relu, with a relu alone.
          for (const int epilogue : {0, 1, 2, 3}) {
            const float* with_bias = epilogue == 1 || epilogue == 2 ? bias.data() : nullptr;
            const bool relu = epilogue >= 2;
            std::vector<float> whole(static_cast<std::size_t>(n * width)), passes(whole.size());
            direct_window_product(channels, taps, dc.sources.data(), dc.tap_offsets.data(), dc.offsets.data(), n, vectors,
                                  dc.filter.data(), DirectSums{false, with_bias, relu}, whole.data());
            // Passes of 1, 2, 3... channels: [0, 1), [1, 3), [3, 6)...; the last one adds the bias.
            for (std::int64_t c0 = 0, size = 1; c0 < channels; c0 += size, ++size) {
              const std::int64_t count = std::min(size, channels - c0);
              const bool last = c0 + count == channels;
              direct_window_product(count, taps, dc.sources.data() + c0, dc.tap_offsets.data(), dc.offsets.data(), n, vectors,
                                    dc.filter.data() + c0 * taps * width,
                                    DirectSums{c0 > 0, last ? with_bias : nullptr, last && relu}, passes.data());
            }
            for (std::int64_t p = 0; p < n; ++p) {
              for (std::int64_t o = 0; o < width; ++o) {
                float chain = 0.0f;
                for (std::int64_t c = 0; c < channels; ++c) {
                  for (std::int64_t t = 0; t < taps; ++t) {
                    const float x = dc.source(c, t, p), w = dc.weight(c, t, o);
                    if (fused) {
                      chain = testing::fma_float(x, w, chain);
                    } else {
                      const float product = x * w;
                      chain += product;
                    }
                  }
                }
                if (with_bias) chain += bias[static_cast<std::size_t>(o)];
                if (relu) chain = chain > 0.0f ? chain : 0.0f;
                const std::size_t at = static_cast<std::size_t>(p * width + o);
                ASSERT_EQ(bits_of(whole[at]), bits_of(chain))
                    << "fused " << fused << " vectors " << vectors << " channels " << channels << " taps " << taps
                    << " n " << n << " row " << row << " step " << step << " epilogue " << epilogue << " at " << p << ", "
                    << o << ": " << whole[at] << " vs " << chain;
                ASSERT_EQ(bits_of(passes[at]), bits_of(chain))
                    << "in passes: vectors " << vectors << " channels " << channels << " taps " << taps << " n " << n
                    << " row " << row << " step " << step << " epilogue " << epilogue << " at " << p << ", " << o;
              }
            }
          }
        }
      }
    }
  }
}

TEST(Direct, WindowProductIsOneChainPerOutput) { expect_one_chain_per_output(0, 1); }

// Rows of 3 to 30 positions, 1 or 2 elements apart (stride-1 and stride-2 layers): rows of 6 or
// more cut tiles of 12 into row tiles, shorter ones are spanned by general tiles.
TEST(Direct, RowTilesAreOneChainPerOutput) {
  for (const std::int64_t row : {3, 5, 6, 7, 13, 14, 30}) {
    for (const std::int64_t step : {1, 2}) expect_one_chain_per_output(row, step);
  }
}

// Windows of rows of three adjacent taps: rows of 3 to 30 positions, 1 or 2 elements apart, cut
// into tiles of 5 or 6 (triple tiles, where the kernel has them: AVX2) unless a tile of 4 or
// fewer would be left (rows of 3, 4, 7, 8, 9, 13, 14: general tiles across rows).
TEST(Direct, TripleTilesAreOneChainPerOutput) {
  for (const std::int64_t row : {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 30}) {
    for (const std::int64_t step : {1, 2}) expect_one_chain_per_output(row, step, true);
  }
}

// pack_direct_filter against its index formula, exactly: widths of 1, 2 and 4 vectors and
// others that are not multiples of 8, every used count up to the width (8 x 8 transposes, then
// the tail channels, then zeros), K around the transposes' 8 (3x3 windows of 1 or 2 channels:
// 9, 18), rows spaced wider than K. Nothing past K * width is written.
TEST(Direct, FilterPackingMatchesTheLayout) {
  const std::int64_t L = simd_lanes<float>();
  const float sentinel = -7.0f;
  for (const std::int64_t width : {L, 2 * L, 4 * L, std::int64_t{12}, std::int64_t{20}}) {
    for (const std::int64_t K : {1, 3, 7, 8, 9, 17, 18}) {
      const std::int64_t ld = K + 5;
      std::vector<float> rows(static_cast<std::size_t>(width * ld));
      for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i + 1);
      for (std::int64_t used = 1; used <= width; ++used) {
        std::vector<float> packed(static_cast<std::size_t>(K * width + 1), sentinel);
        pack_direct_filter(rows.data(), ld, used, K, width, packed.data());
        for (std::int64_t k = 0; k < K; ++k) {
          for (std::int64_t o = 0; o < width; ++o) {
            const float expected = o < used ? rows[static_cast<std::size_t>(o * ld + k)] : 0.0f;
            ASSERT_EQ(packed[static_cast<std::size_t>(k * width + o)], expected)
                << "width " << width << " K " << K << " used " << used << " at k " << k << ", o " << o;
          }
        }
        ASSERT_EQ(packed.back(), sentinel) << "wrote past K * width: width " << width << " K " << K << " used " << used;
      }
    }
  }
}

TEST(Direct, VectorsFollowTheIsa) { EXPECT_EQ(direct_vectors(), avx512_enabled() ? 4 : 2); }

// pack_gemm_a_columns gives pack_gemm_a's bytes: row tails (M not a multiple of kGemmRows,
// padded with zeros) and column blocks with tails (K around kColumnBlock = 16), the columns
// read from runs spaced wider than M (as a filter's input-channel rows are).
TEST(Gemm, ColumnPackingMatchesRowPacking) {
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (std::int64_t M : {1, 5, 6, 7, 13, 40}) {
    for (std::int64_t K : {1, 15, 16, 17, 40}) {
      const std::int64_t stride = M + 3;  // column k at transposed[k * stride ...]
      std::vector<float> transposed(static_cast<std::size_t>(K * stride));
      for (float& v : transposed) v = value(rng);
      const std::size_t size = static_cast<std::size_t>(round_up(M, kGemmRows) * K);
      std::vector<float> by_rows(size, -1.0f), by_columns(size, -2.0f);
      pack_gemm_a(M, K, [&](std::int64_t i, std::int64_t k) { return transposed[static_cast<std::size_t>(k * stride + i)]; },
                  by_rows.data());
      pack_gemm_a_columns(M, K, [&](std::int64_t k) { return transposed.data() + k * stride; }, by_columns.data());
      EXPECT_EQ(by_columns, by_rows) << "M " << M << " K " << K;
    }
  }
}

// pack_gemm_a_rows gives pack_gemm_a's bytes: whole panels and a tail panel (M around
// kGemmRows), K around the eight columns of a vector step, rows spaced wider than K.
template <class Acc>
void check_pack_a_rows() {
  std::mt19937 rng(32);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  for (std::int64_t M : {1, 5, 6, 7, 12, 13, 40}) {
    for (std::int64_t K : {1, 7, 8, 9, 17, 40}) {
      const std::int64_t lda = K + 5;
      std::vector<Acc> a(static_cast<std::size_t>(M * lda));
      for (Acc& v : a) v = static_cast<Acc>(value(rng));
      const std::size_t size = static_cast<std::size_t>(round_up(M, kGemmRows) * K);
      std::vector<Acc> expected(size, Acc(-1)), packed(size, Acc(-2));
      pack_gemm_a(M, K, [&](std::int64_t i, std::int64_t k) { return a[static_cast<std::size_t>(i * lda + k)]; },
                  expected.data());
      pack_gemm_a_rows(M, K, a.data(), lda, packed.data());
      EXPECT_EQ(packed, expected) << "M " << M << " K " << K;
    }
  }
}

TEST(Gemm, RowPackingMatchesTheGenericPacking) {
  check_pack_a_rows<float>();
  check_pack_a_rows<double>();
}

TEST(Gemm, GatherPackingMatchesTheLayout) {
  check_gemm_b_gather<float>();
  check_gemm_b_gather<double>();
}

TEST(Gemm, WeightedRowSumMatchesPlainLoops) {
  check_weighted_row_sum<float>();
  check_weighted_row_sum<double>();
}

TEST(Gemm, PackedProductMatchesPlainLoops) {
  check_gemm<float>();
  check_gemm<double>();
}

TEST(Activation, TableAndFormulas) {
  ASSERT_EQ(activation_table().size(), 18u);
  for (std::size_t i = 0; i < activation_table().size(); ++i)
    EXPECT_EQ(static_cast<std::size_t>(activation_table()[i].kind), i) << activation_table()[i].name;
  const auto run = [](const char* name, std::vector<float> params, double x) {
    const FusedActivation act = make_activation("Test", name, params);
    double d = x;
    float f = static_cast<float>(x);
    apply_activation(act, &d, 1);
    apply_activation(act, &f, 1);
    EXPECT_NEAR(f, d, 1e-6 * (1 + std::abs(d))) << name;
    return d;
  };
  EXPECT_DOUBLE_EQ(run("relu", {}, -2), 0);
  EXPECT_DOUBLE_EQ(run("leaky_relu", {0.5f}, -2), -1);
  EXPECT_DOUBLE_EQ(run("DML_OPERATOR_ACTIVATION_LINEAR", {2.0f, 1.0f}, 3), 7);
  EXPECT_DOUBLE_EQ(run("hard_sigmoid", {0.2f, 0.5f}, 10), 1);
  EXPECT_DOUBLE_EQ(run("shrink", {0.25f, 0.5f}, 1), 0.75);
  EXPECT_DOUBLE_EQ(run("shrink", {0.25f, 0.5f}, -0.4), 0);
  EXPECT_DOUBLE_EQ(run("thresholded_relu", {1.0f}, 1), 0);
  EXPECT_DOUBLE_EQ(run("clip", {-1.0f, 2.0f}, 5), 2);
  EXPECT_DOUBLE_EQ(run("softsign", {}, 1), 0.5);
  EXPECT_NEAR(run("gelu", {}, 1), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(run("sigmoid", {}, 0), 0.5, 1e-15);
  EXPECT_NEAR(run("softplus", {2.0f}, 0), std::log(2.0) / 2, 1e-15);
  EXPECT_NEAR(run("softplus", {1.0f}, 800), 800, 1e-12);  // no overflow
  EXPECT_NEAR(run("celu", {2.0f}, -2), 2 * std::expm1(-1.0), 1e-15);
  EXPECT_NEAR(run("scaled_elu", {1.67326f, 1.0507f}, -1), double(1.0507f) * double(1.67326f) * std::expm1(-1.0), 1e-15);
  EXPECT_NE(message_of<InvalidArgument>([] { make_activation("Test", "swish", {}); }).find("unknown"), std::string::npos);
  EXPECT_THROW(make_activation("Test", "elu", {}), InvalidArgument);
  EXPECT_THROW(make_activation("Test", "celu", {0.0f}), InvalidArgument);
  EXPECT_THROW(make_activation("Test", "softplus", {0.0f}), InvalidArgument);
  EXPECT_THROW(make_activation("Test", "clip", {1.0f, 0.0f}), InvalidArgument);
}

}  // namespace
}  // namespace dmlops

namespace dmlops {
namespace {

TEST(AxisMap, PushMergesRegularStretchesIntoRuns) {
  AxisMap map{-1, -1, 2, 1, 0, 0, 0, 5, 6, 7, 9};
  const std::vector<MapRun> expected = {{2, -1, 0}, {3, 2, -1}, {2, 0, 0}, {3, 5, 1}, {1, 9, 0}};
  ASSERT_EQ(map.runs().size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(map.runs()[i].length, expected[i].length) << i;
    EXPECT_EQ(map.runs()[i].src, expected[i].src) << i;
    if (expected[i].length > 1 && expected[i].src >= 0) {
      EXPECT_EQ(map.runs()[i].step, expected[i].step) << i;
    }
  }
  EXPECT_EQ(map.size(), 11);
  EXPECT_EQ(map.indices(), (std::vector<std::int64_t>{-1, -1, 2, 1, 0, 0, 0, 5, 6, 7, 9}));
  map.push_run(0, 1, 1000000);  // a padded axis' interior: one run, whatever its length
  EXPECT_EQ(map.size(), 1000011);
  EXPECT_EQ(map.runs().size(), expected.size() + 1);
  EXPECT_TRUE(AxisMap{}.is_identity());
  EXPECT_THROW(AxisMap({0, -2}), InvalidArgument);
}

// The separable gather's plan names the path the run takes: a fill where a size-1 output axis
// lies in the fill, a copy where no axis is remapped, else rows of runs.
TEST(SeparableGatherPlan, FillCopyOrGather) {
  testing::ThreadCountGuard guard(2);
  TensorView in{DataType::Int16, {3, 5}, {10, 2}, nullptr}, out{DataType::Int16, {1, 5}, {10, 2}, nullptr};
  EXPECT_EQ(describe_separable_gather(in, out, {AxisMap{-1}, AxisMap{}}).algorithm, "fill");
  EXPECT_EQ(describe_separable_gather(in, out, {AxisMap{2}, AxisMap{}}).algorithm, "copy");
  out.sizes = {3, 8};
  out.byte_strides = {16, 2};
  const KernelPlan p = describe_separable_gather(in, out, {AxisMap{}, AxisMap{0, 0, 0, 0, 1, 2, 3, 4}});
  EXPECT_EQ(p.algorithm, "gather");
  EXPECT_EQ(p.tasks, 3);
  const std::map<std::string, std::int64_t> tiles = testing::tiles_of(p);
  EXPECT_EQ(tiles.at("rows"), 3);
  EXPECT_EQ(tiles.at("row"), 8);
  EXPECT_EQ(tiles.at("gather_runs"), 1);  // eight short entries: one gather
}

}  // namespace
}  // namespace dmlops
