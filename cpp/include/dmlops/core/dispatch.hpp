// The one place a runtime DataType becomes a compile-time element type.
//
//   visit_dtype(dtype, [&](auto tag) { using T = typename decltype(tag)::type; ... });
//   visit_width(dtype, [&](auto tag) { ... });  // T = uint8/16/32/64_t of the same size
//   visit_size(bytes, [&](auto tag) { ... });    // the same, from an element size
//
// Arithmetic kernels use visit_dtype (T is float, Half, int8_t, ...). Data-movement kernels
// use visit_width: they only copy bits, so one instantiation per element size serves every
// dtype of that size, and FLOAT16 or NaN payloads move bit-exactly for free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "dmlops/core/dtype.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/half.hpp"

namespace dmlops {

template <class T>
struct TypeTag {
  using type = T;
};

template <class F>
decltype(auto) visit_dtype(DataType dtype, F&& fn) {
  switch (dtype) {
    case DataType::Float32: return fn(TypeTag<float>{});
    case DataType::Float16: return fn(TypeTag<Half>{});
    case DataType::Float64: return fn(TypeTag<double>{});
    case DataType::UInt8: return fn(TypeTag<std::uint8_t>{});
    case DataType::UInt16: return fn(TypeTag<std::uint16_t>{});
    case DataType::UInt32: return fn(TypeTag<std::uint32_t>{});
    case DataType::UInt64: return fn(TypeTag<std::uint64_t>{});
    case DataType::Int8: return fn(TypeTag<std::int8_t>{});
    case DataType::Int16: return fn(TypeTag<std::int16_t>{});
    case DataType::Int32: return fn(TypeTag<std::int32_t>{});
    case DataType::Int64: return fn(TypeTag<std::int64_t>{});
  }
  fail<DTypeError>("unknown DataType value ", static_cast<int>(dtype));
}

template <class F>
decltype(auto) visit_size(std::size_t bytes, F&& fn) {
  switch (bytes) {
    case 1: return fn(TypeTag<std::uint8_t>{});
    case 2: return fn(TypeTag<std::uint16_t>{});
    case 4: return fn(TypeTag<std::uint32_t>{});
    case 8: return fn(TypeTag<std::uint64_t>{});
  }
  fail<DTypeError>("unsupported element size ", bytes);
}

template <class F>
decltype(auto) visit_width(DataType dtype, F&& fn) {
  return visit_size(element_size(dtype), std::forward<F>(fn));
}

// fn(tag) for the floating dtypes only (float, Half, double), which the arithmetic kernels that
// compute in float or double take; nothing for the others (callers have rejected them).
template <class F>
void visit_float(DataType dtype, F&& fn) {
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half>) fn(tag);
  });
}

}  // namespace dmlops
