// Helpers shared by the GoogleTest files: reproducible random bits, a thread-count guard,
// exception messages, float16/32/64 elements read and written as double, and StridedBuffer, a
// tensor laid out in memory the way numpy views can be:
//
//   StridedBuffer b(DataType::Float32, sizes, Layout{}.order({1, 0}).negate(0b01).steps({1, 2}));
//   b.view()      // TensorView of the tensor
//   b.element(i)  // address of element i
//
// Unused bytes between the elements hold a sentinel, so a tester can check that a kernel wrote
// nothing outside its output (written_outside()).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dmlops/core/dims.hpp"
#include "dmlops/core/dtype.hpp"
#include "dmlops/core/half.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/core/plan.hpp"
#include "dmlops/core/platform.hpp"
#include "dmlops/core/tensor.hpp"

#if DMLOPS_X86 && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

namespace dmlops::testing {

// A plan's tiles by name.
inline std::map<std::string, std::int64_t> tiles_of(const KernelPlan& plan) {
  return {plan.tiles.begin(), plan.tiles.end()};
}

// The compiler's own x86 feature detection (libgcc's cpuid), independent of the library's
// platform::cpu_features(); false for every x86 feature on other processors.
#if DMLOPS_X86 && (defined(__GNUC__) || defined(__clang__))
#define DMLOPS_TEST_CPU_SUPPORTS(feature) (__builtin_cpu_supports(feature) != 0)
#else
#define DMLOPS_TEST_CPU_SUPPORTS(feature) (static_cast<void>(feature), false)
#endif
inline bool cpu_supports(const char* feature) {
  const std::string f = feature;
  if (f == "avx") return DMLOPS_TEST_CPU_SUPPORTS("avx");
  if (f == "avx2") return DMLOPS_TEST_CPU_SUPPORTS("avx2");
  if (f == "fma") return DMLOPS_TEST_CPU_SUPPORTS("fma");
  if (f == "f16c") {
#if DMLOPS_X86 && defined(__clang__)  // Clang's builtin knows no "f16c": CPUID leaf 1, ECX bit 29
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && ((ecx >> 29) & 1) != 0;
#else
    return DMLOPS_TEST_CPU_SUPPORTS("f16c");
#endif
  }
  if (f == "avx512f") return DMLOPS_TEST_CPU_SUPPORTS("avx512f");
  ADD_FAILURE() << "cpu_supports: unknown feature " << f;
  return false;
}

// x * y + z rounded once to float, without the C library: MinGW-w64's fmaf rounds about one
// product in four wrongly (seen under wine). The product is exact in double; TwoSum gives the
// error of the double sum; rounding that sum to odd (nudging it off a double tie towards the
// error) and then to float rounds once, since double has more than 24 + 2 significant bits.
inline float fma_float(float x, float y, float z) {
  const double p = static_cast<double>(x) * y, c = z;
  const double s = p + c;
  const double pp = s - c, cc = s - pp;
  const double error = (p - pp) + (c - cc);
  std::uint64_t bits;
  std::memcpy(&bits, &s, sizeof bits);
  if (error != 0 && (bits & 1) == 0) {  // s is not exact: make it odd, towards the exact sum
    bits += ((error > 0) == (s > 0)) ? 1 : -1;
    double odd;
    std::memcpy(&odd, &bits, sizeof odd);
    return static_cast<float>(odd);
  }
  return static_cast<float>(s);
}

// x * y + z rounded once to double. MinGW-w64's fma is wrong as its fmaf is (seen under wine),
// so on x86 this is the CPU's FMA instruction: call it only where the CPU has one.
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
[[gnu::target("fma")]] inline double fma_double(double x, double y, double z) { return __builtin_fma(x, y, z); }
#else
inline double fma_double(double x, double y, double z) { return std::fma(x, y, z); }
#endif

// Sets an environment variable of this process, or removes it (value null).
inline void set_env(const char* name, const char* value) {
#if defined(_WIN32)
  _putenv_s(name, value ? value : "");  // "" removes it on Windows
#else
  if (value) ::setenv(name, value, 1);
  else ::unsetenv(name);
#endif
}

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

struct Layout {
  std::vector<int> order_;      // memory order of the axes, outermost first (empty: row-major)
  std::uint32_t negate_ = 0;    // axes walked backwards (negative strides)
  std::uint32_t broadcast_ = 0; // axes with stride 0 (one stored element repeated)
  Dims steps_;                  // every steps[a]-th element along axis a (empty: all 1)
  std::int64_t misalign_ = 0;   // bytes past an aligned address where the buffer starts

  Layout& order(std::vector<int> v) { order_ = std::move(v); return *this; }
  Layout& negate(std::uint32_t axes) { negate_ = axes; return *this; }
  Layout& broadcast(std::uint32_t axes) { broadcast_ = axes; return *this; }
  Layout& steps(Dims v) { steps_ = v; return *this; }
  Layout& misalign(std::int64_t bytes) { misalign_ = bytes; return *this; }
};

class StridedBuffer {
 public:
  static constexpr std::byte kSentinel{0xa5};

  StridedBuffer(DataType dtype, const Dims& sizes, const Layout& layout = {})
      : dtype_(dtype), sizes_(sizes), elem_(static_cast<std::int64_t>(element_size(dtype))) {
    const int rank = sizes.size();
    std::vector<int> order = layout.order_;
    if (order.empty()) {
      order.resize(static_cast<std::size_t>(rank));
      std::iota(order.begin(), order.end(), 0);
    }
    const Dims steps = layout.steps_.empty() ? Dims::filled(rank, 1) : layout.steps_;
    strides_ = Dims::filled(rank, 0);
    std::int64_t extent = 1;  // elements
    for (int k = rank - 1; k >= 0; --k) {
      const int a = order[static_cast<std::size_t>(k)];
      if ((layout.broadcast_ >> a) & 1u) continue;
      strides_[a] = steps[a] * extent;
      extent *= sizes[a] * steps[a];
    }
    std::int64_t origin = 0;  // element [0, ..., 0], counted from the buffer start
    for (int a = 0; a < rank; ++a) {
      if ((layout.negate_ >> a) & 1u) {
        origin += (sizes[a] - 1) * strides_[a];
        strides_[a] = -strides_[a];
      }
    }
    bytes_.assign(static_cast<std::size_t>(extent * elem_ + layout.misalign_), kSentinel);
    origin_ = layout.misalign_ + origin * elem_;
    for (std::int64_t& s : strides_) s *= elem_;
  }

  DataType dtype() const { return dtype_; }
  const Dims& sizes() const { return sizes_; }
  const Dims& byte_strides() const { return strides_; }
  TensorView view() { return TensorView{dtype_, sizes_, strides_, data()}; }
  std::byte* data() { return bytes_.data() + origin_; }
  std::byte* element(const Dims& index) {
    std::int64_t offset = 0;
    for (int a = 0; a < index.size(); ++a) offset += index[a] * strides_[a];
    return data() + offset;
  }
  const std::vector<std::byte>& bytes() const { return bytes_; }

  // Number of bytes outside every element that no longer hold the sentinel.
  std::int64_t written_outside() {
    std::vector<bool> inside(bytes_.size(), false);
    const std::int64_t total = sizes_.product();
    Dims index = Dims::filled(sizes_.size(), 0);
    for (std::int64_t flat = 0; flat < total; ++flat) {
      const auto first = static_cast<std::size_t>(element(index) - bytes_.data());
      for (std::int64_t b = 0; b < elem_; ++b) inside[first + static_cast<std::size_t>(b)] = true;
      for (int a = sizes_.size() - 1; a >= 0; --a) {
        if (++index[a] < sizes_[a]) break;
        index[a] = 0;
      }
    }
    std::int64_t stray = 0;
    for (std::size_t i = 0; i < bytes_.size(); ++i) stray += !inside[i] && bytes_[i] != kSentinel;
    return stray;
  }

 private:
  DataType dtype_;
  Dims sizes_, strides_;
  std::int64_t elem_;
  std::vector<std::byte> bytes_;
  std::int64_t origin_ = 0;
};

}  // namespace dmlops::testing
