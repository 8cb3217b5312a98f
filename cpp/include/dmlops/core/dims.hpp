// Dims: a fixed-capacity vector of signed 64-bit extents or strides (no heap allocation).
// DirectML tensors have at most 8 dimensions, so every shape, stride and per-axis
// parameter array in dmlops fits in one.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ostream>

#include "dmlops/core/error.hpp"

namespace dmlops {

inline constexpr int kMaxRank = 8;

class Dims {
 public:
  using value_type = std::int64_t;

  Dims() = default;
  Dims(std::initializer_list<std::int64_t> values) {
    for (std::int64_t v : values) push_back(v);
  }
  template <class It>
  Dims(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<std::int64_t>(*first));
  }
  static Dims filled(int rank, std::int64_t value) {
    Dims d;
    for (int i = 0; i < rank; ++i) d.push_back(value);
    return d;
  }

  int size() const { return rank_; }
  bool empty() const { return rank_ == 0; }
  void push_back(std::int64_t v) {
    if (rank_ == kMaxRank) fail("a tensor has at most ", kMaxRank, " dimensions");
    values_[rank_++] = v;
  }
  void erase(int index) {
    std::copy(values_.begin() + index + 1, values_.begin() + rank_, values_.begin() + index);
    --rank_;
  }
  std::int64_t& operator[](int i) { return values_[i]; }
  std::int64_t operator[](int i) const { return values_[i]; }
  std::int64_t* begin() { return values_.data(); }
  std::int64_t* end() { return values_.data() + rank_; }
  const std::int64_t* begin() const { return values_.data(); }
  const std::int64_t* end() const { return values_.data() + rank_; }
  std::int64_t back() const { return values_[rank_ - 1]; }

  // Product of the entries (1 for an empty Dims).
  std::int64_t product() const {
    std::int64_t p = 1;
    for (std::int64_t v : *this) p *= v;
    return p;
  }

  friend bool operator==(const Dims& a, const Dims& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator!=(const Dims& a, const Dims& b) { return !(a == b); }
  // As Python prints a tuple, (2, 3) or (4,), so messages read like the shapes users pass.
  friend std::ostream& operator<<(std::ostream& os, const Dims& d) {
    os << '(';
    for (int i = 0; i < d.size(); ++i) os << (i ? ", " : "") << d[i];
    return os << (d.size() == 1 ? ",)" : ")");
  }

 private:
  std::array<std::int64_t, kMaxRank> values_{};
  int rank_ = 0;
};

}  // namespace dmlops
