// Helpers shared by the GoogleTest files: reproducible random bits, a thread-count guard,
// exception messages, and float16/32/64 elements read and written as double.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "dmlops/core/dtype.hpp"
#include "dmlops/core/half.hpp"
#include "dmlops/core/parallel.hpp"

namespace dmlops::testing {

// SplitMix64: a tiny, seedable generator of well-mixed 64-bit patterns.
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

// Restores the default thread count when a case that changed it ends, however it ends.
struct ThreadCountGuard {
  explicit ThreadCountGuard(std::optional<int> n) : active(n.has_value()) {
    if (n) set_num_threads(*n);
  }
  ~ThreadCountGuard() {
    if (active) set_num_threads(default_num_threads());
  }
  ThreadCountGuard(const ThreadCountGuard&) = delete;
  ThreadCountGuard& operator=(const ThreadCountGuard&) = delete;
  bool active;
};

// Runs f, expects an exception of exactly type E (a different type escapes and fails the
// test) and returns its message.
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return {};
}

// A FLOAT16, FLOAT32 or FLOAT64 element as a double, and back (rounded to the dtype once).
inline double float_at(DataType dtype, const std::byte* p) {
  switch (dtype) {
    case DataType::Float16: {
      std::uint16_t h;
      std::memcpy(&h, p, 2);
      return half_bits_to_float(h);
    }
    case DataType::Float32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

inline void store_float(DataType dtype, std::byte* p, double v) {
  switch (dtype) {
    case DataType::Float16: {
      const std::uint16_t h = float_to_half_bits(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DataType::Float32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    default: std::memcpy(p, &v, 8); break;
  }
}

}  // namespace dmlops::testing
