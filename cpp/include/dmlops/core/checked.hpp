// Overflow-checked 64-bit arithmetic for every size, stride, extent, offset and byte count that
// comes from user input. The one place such arithmetic is spelled: kernels may then compute
// freely with values these functions (or validate_tensor_desc, which uses them) accepted.
//
// Checked values stay within +-2^62 (kSizeLimit): no tensor has that many elements or bytes, and
// the margin lets kernels add two accepted values (an offset and a stride) without overflow.
#pragma once

#include <cstdint>
#include <utility>

#include "dmlops/core/error.hpp"
#include "dmlops/core/platform.hpp"

namespace dmlops {

inline constexpr std::int64_t kSizeLimit = std::int64_t{1} << 62;

// *out = a * b / a + b; true when the exact result does not fit in int64 (then *out is
// unchanged). The platform layer spells them for each compiler.
inline bool mul_overflows(std::int64_t a, std::int64_t b, std::int64_t* out) { return platform::mul_overflow(a, b, out); }
inline bool add_overflows(std::int64_t a, std::int64_t b, std::int64_t* out) { return platform::add_overflow(a, b, out); }

// True when |v| <= kSizeLimit.
constexpr bool within_limit(std::int64_t v) { return v <= kSizeLimit && v >= -kSizeLimit; }

// a * b (a + b), or InvalidArgument "<what...> is beyond 2^62" when the exact result is not
// within +-2^62. `what` streams into the message like fail()'s parts: name the operator and field.
template <class... What>
std::int64_t checked_mul(std::int64_t a, std::int64_t b, What&&... what) {
  std::int64_t p = 0;
  if (mul_overflows(a, b, &p) || !within_limit(p)) fail(std::forward<What>(what)..., " is beyond 2^62");
  return p;
}

template <class... What>
std::int64_t checked_add(std::int64_t a, std::int64_t b, What&&... what) {
  std::int64_t s = 0;
  if (add_overflows(a, b, &s) || !within_limit(s)) fail(std::forward<What>(what)..., " is beyond 2^62");
  return s;
}

// The window extent (window - 1) * dilation + 1, checked (window >= 1, dilation >= 1).
template <class... What>
std::int64_t checked_extent(std::int64_t window, std::int64_t dilation, What&&... what) {
  return checked_add(checked_mul(window - 1, dilation, what...), 1, std::forward<What>(what)...);
}

}  // namespace dmlops
