// Row primitives of the data-movement kernels (separable gather, unfold): load, fill and copy
// `n` elements of width sizeof(T) between strided byte addresses.
//
// T is the element's width type from visit_width (uint8/16/32/64_t): bits move unchanged, so
// every dtype of that width (FLOAT16, NaN payloads) is bit-exact. Addresses may be misaligned
// and steps negative or zero; when both sides are unit-stride the row is one memcpy or one
// vectorised fill.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dmlops {

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <class T>
void fill_row(std::byte* dst, std::int64_t dst_step, T value, std::int64_t n) {
  if (n <= 2) {  // short fills (a window's edge) cost more as a memset call than as stores
    if (n > 0) std::memcpy(dst, &value, sizeof(T));
    if (n > 1) std::memcpy(dst + dst_step, &value, sizeof(T));
    return;
  }
  if (dst_step == sizeof(T) && reinterpret_cast<std::uintptr_t>(dst) % alignof(T) == 0) {
    std::fill_n(reinterpret_cast<T*>(dst), n, value);  // vectorised by the compiler
    return;
  }
  for (std::int64_t i = 0; i < n; ++i, dst += dst_step) std::memcpy(dst, &value, sizeof(T));
}

// src_step 0 broadcasts one element.
template <class T>
void copy_row(std::byte* dst, std::int64_t dst_step, const std::byte* src, std::int64_t src_step, std::int64_t n) {
  if (src_step == 0) return fill_row<T>(dst, dst_step, load<T>(src), n);
  if (dst_step == sizeof(T) && src_step == sizeof(T)) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T));
    return;
  }
  if (dst_step == sizeof(T) && src_step == 2 * sizeof(T) && reinterpret_cast<std::uintptr_t>(dst) % alignof(T) == 0 &&
      reinterpret_cast<std::uintptr_t>(src) % alignof(T) == 0) {
    // Every other element (a stride-2 window): typed, so the compiler vectorises the deinterleave.
    T* d = reinterpret_cast<T*>(dst);
    const T* s = reinterpret_cast<const T*>(src);
    for (std::int64_t i = 0; i < n; ++i) d[i] = s[2 * i];
    return;
  }
  for (std::int64_t i = 0; i < n; ++i, dst += dst_step, src += src_step) std::memcpy(dst, src, sizeof(T));
}

}  // namespace dmlops
