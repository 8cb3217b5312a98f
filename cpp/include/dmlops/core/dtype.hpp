// DataType: the 11 DirectML tensor data types, and Scalar: one value of such a type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dmlops {

// Same order as DML_TENSOR_DATA_TYPE (UNKNOWN = 0 is not representable here).
enum class DataType : std::uint8_t {
  Float32 = 1,
  Float16,
  UInt32,
  UInt16,
  UInt8,
  Int32,
  Int16,
  Int8,
  Float64,
  UInt64,
  Int64,
};

inline constexpr DataType kAllDataTypes[] = {
    DataType::Float32, DataType::Float16, DataType::Float64, DataType::UInt8,
    DataType::UInt16,  DataType::UInt32,  DataType::UInt64,  DataType::Int8,
    DataType::Int16,   DataType::Int32,   DataType::Int64};

std::size_t element_size(DataType dtype);
bool is_floating(DataType dtype);
bool is_signed_integer(DataType dtype);

// "float32", ... (numpy names).
std::string_view name(DataType dtype);
// "FLOAT32", ... (DirectML names without the DML_TENSOR_DATA_TYPE_ prefix).
std::string_view dml_name(DataType dtype);
// Accepts the numpy name, the DirectML name with or without prefix; throws DTypeError.
DataType parse_data_type(std::string_view text);

// A number as the caller gave it, before it is fitted into a tensor's dtype.
struct Number {
  enum class Kind { Int, UInt, Float } kind = Kind::Float;
  std::int64_t i = 0;   // Kind::Int
  std::uint64_t u = 0;  // Kind::UInt (values above INT64_MAX)
  double f = 0.0;       // Kind::Float

  static Number from_int(std::int64_t v) { return {Kind::Int, v, 0, 0.0}; }
  static Number from_uint(std::uint64_t v) { return {Kind::UInt, 0, v, 0.0}; }
  static Number from_float(double v) { return {Kind::Float, 0, 0, v}; }
};

// One element of a tensor: its dtype and its bit pattern (low element_size bytes used).
// Kernels that only move data use `bits` directly, whatever the dtype means.
struct Scalar {
  DataType dtype = DataType::Float32;
  std::uint64_t bits = 0;

  // The value exactly, or InvalidArgument naming `context` when the dtype cannot hold it
  // (300 into UINT8, 0.5 into INT32, 1e39 into FLOAT32). Floats round to nearest; inf and
  // nan are kept for float dtypes. This is DML_SCALAR_UNION typed by a DataType field.
  static Scalar exact(DataType dtype, Number value, std::string_view context);
  // DML_PADDING_OPERATOR_DESC's FLOAT value: for integer dtypes truncated toward zero and
  // saturated to the range (nan -> 0); for float dtypes rounded to nearest.
  static Scalar saturating(DataType dtype, float value);

  double to_double() const;  // for printing and tests
  friend bool operator==(const Scalar& a, const Scalar& b) {
    return a.dtype == b.dtype && a.bits == b.bits;
  }
};

}  // namespace dmlops
