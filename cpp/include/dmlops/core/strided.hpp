// Strided N-d iteration: normalise an iteration space once, then walk it row by row.
//
// A StridedLayout<K> is an iteration space (sizes, outer to inner) shared by K operands,
// each with its own signed byte strides. Kernels normalise it before looping:
//   sort_by_stride(key)  puts the dimension with the smallest |stride| of operand `key`
//                        innermost, so the inner loop walks memory forwards in small steps;
//   coalesce(pinned)     drops size-1 dimensions and merges neighbours that are contiguous in
//                        every operand, so the inner loop is one long row.
// Dimensions a kernel must see individually (e.g. padded axes) are `pinned` by their original
// axis number and survive both steps; source_axis(d) tells which original axis d is.
// NdCounter then walks the outer dimensions from any flat row index, which is how a thread
// starts in the middle of the space.
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>

#include "dmlops/core/dims.hpp"

namespace dmlops {

template <int K>
class StridedLayout {
 public:
  StridedLayout(const Dims& sizes, const std::array<Dims, K>& byte_strides) : rank_(sizes.size()) {
    for (int d = 0; d < rank_; ++d) {
      size_[d] = sizes[d];
      source_[d] = d;
      for (int k = 0; k < K; ++k) stride_[d][k] = byte_strides[k][d];
    }
  }

  int rank() const { return rank_; }
  std::int64_t size(int d) const { return size_[d]; }
  std::int64_t stride(int operand, int d) const { return stride_[d][operand]; }
  int source_axis(int d) const { return source_[d]; }
  Dims sizes() const { return Dims(size_.begin(), size_.begin() + rank_); }

  // Stable sort of the dimensions by decreasing |stride| of operand `key`.
  void sort_by_stride(int key) {
    for (int i = 1; i < rank_; ++i) {
      for (int j = i; j > 0 && magnitude(j - 1, key) < magnitude(j, key); --j) swap_dims(j - 1, j);
    }
  }

  // Removes unpinned size-1 dimensions, then merges each unpinned dimension into its unpinned
  // inner neighbour when every operand steps over the inner one exactly once per outer step.
  void coalesce(std::uint32_t pinned_axes) {
    auto pinned = [&](int d) { return (pinned_axes >> source_[d]) & 1u; };
    int kept = 0;
    for (int d = 0; d < rank_; ++d) {
      if (size_[d] == 1 && !pinned(d)) continue;
      move_dim(d, kept++);
    }
    rank_ = kept;
    int out = 0;
    for (int d = 0; d < rank_; ++d) {
      if (out > 0 && !pinned(out - 1) && !pinned(d) && contiguous(out - 1, d)) {
        size_[out - 1] *= size_[d];
        for (int k = 0; k < K; ++k) stride_[out - 1][k] = stride_[d][k];
        source_[out - 1] = source_[d];
        continue;
      }
      move_dim(d, out++);
    }
    rank_ = out;
  }

 private:
  std::int64_t magnitude(int d, int k) const { return std::llabs(stride_[d][k]); }
  bool contiguous(int outer, int inner) const {
    for (int k = 0; k < K; ++k) {
      if (stride_[outer][k] != stride_[inner][k] * size_[inner]) return false;
    }
    return true;
  }
  void swap_dims(int a, int b) {
    std::swap(size_[a], size_[b]);
    std::swap(stride_[a], stride_[b]);
    std::swap(source_[a], source_[b]);
  }
  void move_dim(int from, int to) {
    size_[to] = size_[from];
    stride_[to] = stride_[from];
    source_[to] = source_[from];
  }

  int rank_;
  std::array<std::int64_t, kMaxRank> size_{};
  std::array<std::array<std::int64_t, K>, kMaxRank> stride_{};
  std::array<int, kMaxRank> source_{};
};

// Row-major multi-index over `sizes`, started at any flat index.
class NdCounter {
 public:
  NdCounter(const Dims& sizes, std::int64_t flat) : sizes_(sizes), index_(Dims::filled(sizes.size(), 0)) {
    for (int d = sizes_.size() - 1; d >= 0; --d) {
      index_[d] = flat % sizes_[d];
      flat /= sizes_[d];
    }
  }
  std::int64_t operator[](int d) const { return index_[d]; }
  // Advances by one; returns the outermost dimension whose index changed
  // (-1 when the counter wrapped past the end).
  int next() {
    for (int d = sizes_.size() - 1; d >= 0; --d) {
      if (++index_[d] < sizes_[d]) return d;
      index_[d] = 0;
    }
    return -1;
  }

 private:
  Dims sizes_;
  Dims index_;
};

}  // namespace dmlops
