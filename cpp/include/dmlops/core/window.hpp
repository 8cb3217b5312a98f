// Sliding-window geometry shared by convolution, pooling, unfold and fold.
//
// On each spatial axis a window of `window` taps spaced `dilation` apart slides with `stride`
// over the input extended by `start` and `end` padding:
//   extent = (window - 1) * dilation + 1
//   out    = (in + start + end - extent) / stride + 1          (must be >= 1)
//   tap t of output position o reads input i = o * stride + t * dilation - start
// Taps with i outside [0, in) fall in the padding. `end` may be negative in a BlockWalker: it
// then cuts the window's last placements off (a transposed convolution walks its output this
// way, with exactly one block per input position whatever the output size). valid_taps() gives the range of taps that
// land inside, so kernels loop over it without a bounds test per tap.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dmlops/core/dims.hpp"

namespace dmlops {

struct WindowAxis {
  std::int64_t in = 1, window = 1, stride = 1, dilation = 1, start = 0, end = 0;

  std::int64_t extent() const { return (window - 1) * dilation + 1; }
  std::int64_t out() const { return (in + start + end - extent()) / stride + 1; }
  std::int64_t input_index(std::int64_t o, std::int64_t t) const { return o * stride + t * dilation - start; }

  // Taps [first, last) of output position o read inside the input (first >= last: none).
  std::pair<std::int64_t, std::int64_t> valid_taps(std::int64_t o) const {
    const std::int64_t base = o * stride - start;  // input index of tap 0
    const std::int64_t first = base >= 0 ? 0 : (-base + dilation - 1) / dilation;
    const std::int64_t past = in - base;            // taps t with base + t*dilation < in
    const std::int64_t last = past <= 0 ? 0 : std::min(window, (past + dilation - 1) / dilation);
    return {first, last};
  }

  // Output positions [first, last) whose tap t reads an input index in [i_begin, i_end),
  // within [0, out()); first == last when there are none. The inverse view of valid_taps():
  // for a fixed tap the positions that land inside form one range.
  std::pair<std::int64_t, std::int64_t> outputs_reading(std::int64_t t, std::int64_t i_begin,
                                                        std::int64_t i_end) const {
    const std::int64_t shift = start - t * dilation;  // o * stride == i + shift
    const std::int64_t first = std::max<std::int64_t>(0, -floor_div(-(i_begin + shift), stride));
    const std::int64_t last = std::min(out(), floor_div(i_end - 1 + shift, stride) + 1);
    return {first, std::max(first, last)};
  }
  // Output positions whose tap t reads inside the input (not the padding).
  std::pair<std::int64_t, std::int64_t> valid_outputs(std::int64_t t) const { return outputs_reading(t, 0, in); }

 private:
  static std::int64_t floor_div(std::int64_t a, std::int64_t b) {  // b > 0
    return a >= 0 ? a / b : -((-a + b - 1) / b);
  }
};

// The per-axis arrays of a windowed operator, as its descriptor carries them.
struct WindowParams {
  Dims window, strides, dilations, start_padding, end_padding;
};

// Checks the arrays for `op` over `spatial_rank` axes: one entry each (empty strides or
// dilations mean all 1; empty paddings all 0), window/stride/dilation >= 1, paddings >= 0,
// and that every axis has at least one output ("no window fits" otherwise). Returns the axes.
// `window_field` names the window array as the operator calls it ("window_size", "window_sizes").
std::vector<WindowAxis> window_axes(const std::string& op, const char* window_field, const Dims& spatial_in,
                                    const WindowParams& params);

// Callables in one object, each overload from its own lambda: BlockWalker::walk's `inside` with
// and without its rows form.
template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;  // C++17's guide: compilers before clang 17 need it

// The blocks of a sliding window seen from one window tap.
//
// A block is one placement of the window, b = (b_0, ..., b_{D-1}) with b_d < axes[d].out(),
// numbered row-major by its flat index `col` (unfold's columns, a convolution's output
// positions). Tap k of block b reads input position p_d = b_d * stride_d + k_d * dilation_d -
// start_d on every axis d. For a fixed tap the blocks that read inside the input form a box
// (WindowAxis::valid_outputs on each axis), so walk() visits a tap's blocks as a few runs
// instead of testing every block:
//   padding(col, count)               blocks col .. col+count-1 read the padding on some axis
//   inside(col, offset, step, count)  blocks col .. col+count-1 read the input at
//                                     offset + j * step, j < count
//   inside(col, offset, step, count, row_step, rows, pitch), where `inside` takes this form:
//                                     `rows` such runs, run r at col + r * pitch reading
//                                     from offset + r * row_step; the pitch - count blocks
//                                     between two runs read padding and are reported only so
//                                     (a tap's rows along the last two axes: one call instead
//                                     of two per row)
// where offset = base_offset + sum_d p_d * position_strides[d], in whatever unit the caller's
// strides are (bytes of a tensor, elements of a scratch buffer); only in-bounds positions
// produce offsets. Runs arrive in increasing `col` order, cover exactly the blocks with b_0 in
// [first0, last0), and are as long as possible: back-to-back runs of the same kind are merged
// (for stride 1 the rows of a tap that reads a whole input row are one run).
class BlockWalker {
 public:
  explicit BlockWalker(std::vector<WindowAxis> axes);

  int rank() const { return static_cast<int>(axes_.size()); }
  const WindowAxis& axis(int d) const { return axes_[static_cast<std::size_t>(d)]; }
  const Dims& blocks() const { return blocks_; }              // axes[d].out()
  std::int64_t block_count() const { return block_count_; }  // product of blocks()
  // Blocks per step of b_d: the product of blocks() after d.
  std::int64_t block_stride(int d) const { return block_strides_[d]; }
  std::int64_t tap_count() const { return tap_count_; }  // product of the window sizes
  // The multi-index of tap `flat` < tap_count() (row-major over the window).
  Dims tap(std::int64_t flat) const;

  template <class Padding, class Inside>
  void walk(const Dims& tap, std::int64_t first0, std::int64_t last0, const Dims& position_strides,
            std::int64_t base_offset, Padding&& padding, Inside&& inside) const {
    Walk<Padding, Inside> w = start_walk<Padding, Inside>(tap, position_strides, padding, inside);
    w.descend(0, first0, last0, 0, base_offset);
    w.flush();
  }

  // walk() over the blocks with flat index in [col_begin, col_end): any range, e.g. a GEMM
  // panel of a convolution's output positions that starts and ends inside a row.
  template <class Padding, class Inside>
  void walk_span(const Dims& tap, std::int64_t col_begin, std::int64_t col_end, const Dims& position_strides,
                 std::int64_t base_offset, Padding&& padding, Inside&& inside) const {
    Walk<Padding, Inside> w = start_walk<Padding, Inside>(tap, position_strides, padding, inside);
    if (col_begin < col_end) w.span(0, col_begin, col_end, 0, base_offset);
    w.flush();
  }

 private:
  template <class PaddingFn, class InsideFn>
  struct Walk;
  template <class PaddingFn, class InsideFn>
  Walk<PaddingFn, InsideFn> start_walk(const Dims& tap, const Dims& position_strides, PaddingFn& padding,
                                       InsideFn& inside) const {
    Walk<PaddingFn, InsideFn> w{*this, tap, position_strides, padding, inside};
    for (int d = 0; d < rank(); ++d) {
      w.range[d] = axis(d).valid_outputs(tap[d]);
      w.shift[d] = tap[d] * axis(d).dilation - axis(d).start;
    }
    return w;
  }

  template <class PaddingFn, class InsideFn>
  struct Walk {
    const BlockWalker& g;
    const Dims& tap;
    const Dims& position_strides;
    PaddingFn& padding;
    InsideFn& inside;
    std::array<std::pair<std::int64_t, std::int64_t>, kMaxRank> range{};
    std::array<std::int64_t, kMaxRank> shift{};  // p_d - b_d * stride_d
    // The run not yet handed over, extended while the next one continues it.
    enum class Kind { None, Padding, Inside } kind = Kind::None;
    std::int64_t run_col = 0, run_offset = 0, run_step = 0, run_count = 0;

    std::int64_t position(int d, std::int64_t b) const { return (b * g.axis(d).stride + shift[d]) * position_strides[d]; }

    void add_padding(std::int64_t col, std::int64_t count) {
      if (kind == Kind::Padding && run_col + run_count == col) {
        run_count += count;
        return;
      }
      flush();
      kind = Kind::Padding;
      run_col = col;
      run_count = count;
    }
    void add_inside(std::int64_t col, std::int64_t offset, std::int64_t step, std::int64_t count) {
      if (kind == Kind::Inside && run_col + run_count == col && run_step == step && run_offset + run_count * step == offset) {
        run_count += count;
        return;
      }
      flush();
      kind = Kind::Inside;
      run_col = col;
      run_offset = offset;
      run_step = step;
      run_count = count;
    }
    void flush() {
      if (kind == Kind::Padding) padding(run_col, run_count);
      if (kind == Kind::Inside) inside(run_col, run_offset, run_step, run_count);
      kind = Kind::None;
    }

    // Blocks with b_d in [first, last) under the block whose flat index starts at `col` and
    // whose positions on the axes before d add up to `offset`.
    void descend(int d, std::int64_t first, std::int64_t last, std::int64_t col, std::int64_t offset) {
      const std::int64_t lo = std::clamp(range[d].first, first, last);
      const std::int64_t hi = std::clamp(range[d].second, lo, last);
      const std::int64_t per_block = g.block_strides_[d];
      if (lo == hi) {
        if (first < last) add_padding(col + first * per_block, (last - first) * per_block);
        return;
      }
      if (first < lo) add_padding(col + first * per_block, (lo - first) * per_block);
      if (d + 1 == g.rank()) {
        add_inside(col + lo, offset + position(d, lo), g.axis(d).stride * position_strides[d], hi - lo);
      } else if (d + 2 == g.rank()) {
        rows(d, lo, hi, col, offset);
      } else {
        for (std::int64_t b = lo; b < hi; ++b) descend(d + 1, 0, g.blocks_[d + 1], col + b * per_block, offset + position(d, b));
      }
      if (hi < last) add_padding(col + hi * per_block, (last - hi) * per_block);
    }

    // Blocks whose flat index is in [c0, c1), counted from `col`, the first block under the
    // prefix b_0 .. b_{d-1} (whose positions add up to `offset`): a partial b_d at each end,
    // whole ones between (descend), down to the last axis where every range is whole.
    void span(int d, std::int64_t c0, std::int64_t c1, std::int64_t col, std::int64_t offset) {
      const std::int64_t per = g.block_strides_[d];
      std::int64_t first = c0 / per;
      if (c0 % per != 0) {
        const std::int64_t end = std::min(c1, (first + 1) * per);
        part(d, first, c0 - first * per, end - first * per, col, offset);
        if (end == c1) return;
        ++first;
      }
      const std::int64_t last = c1 / per;
      if (first < last) descend(d, first, last, col, offset);
      if (c1 % per != 0) part(d, last, 0, c1 - last * per, col, offset);
    }
    // Blocks [c0, c1) under b_d = b, a part of one step of axis d (d is not the last axis).
    void part(int d, std::int64_t b, std::int64_t c0, std::int64_t c1, std::int64_t col, std::int64_t offset) {
      const std::int64_t at = col + b * g.block_strides_[d];
      if (b < range[d].first || b >= range[d].second) return add_padding(at + c0, c1 - c0);
      span(d + 1, c0, c1, at, offset + position(d, b));
    }

    // The hot loop: rows b_d in [lo, hi), all inside on axis d, each split the same way on
    // the last axis (padding, inside, padding). Rows can only merge when they are all padding
    // or back to back in both col and offset; otherwise they go out in one call of the rows
    // form where `inside` takes it, else run by run, the padding between two rows' inside parts
    // as one run.
    void rows(int d, std::int64_t lo, std::int64_t hi, std::int64_t col, std::int64_t offset) {
      const int e = d + 1;
      const std::int64_t width = g.blocks_[e];
      const std::int64_t in_lo = std::clamp<std::int64_t>(range[e].first, 0, width);
      const std::int64_t in_hi = std::clamp(range[e].second, in_lo, width);
      const std::int64_t step = g.axis(e).stride * position_strides[e];
      const std::int64_t row_step = g.axis(d).stride * position_strides[d];
      offset += position(d, lo) + position(e, in_lo);
      col += lo * width;
      const std::int64_t count = in_hi - in_lo, gap = width - count;
      if (count == 0) return add_padding(col, (hi - lo) * width);
      if (gap == 0 && row_step == width * step) return add_inside(col, offset, step, (hi - lo) * width);
      if (in_lo > 0) add_padding(col, in_lo);
      if constexpr (std::is_invocable_v<InsideFn&, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                                        std::int64_t, std::int64_t>) {
        flush();
        inside(col + in_lo, offset, step, count, row_step, hi - lo, width);
        if (in_hi < width) add_padding(col + (hi - lo - 1) * width + in_hi, width - in_hi);
        return;
      }
      add_inside(col + in_lo, offset, step, count);
      if (lo + 1 == hi) {
        if (in_hi < width) add_padding(col + in_hi, width - in_hi);
        return;
      }
      flush();
      for (std::int64_t b = lo + 1; b < hi; ++b) {
        if (gap > 0) padding(col + in_hi, gap);  // this row's tail and the next row's head
        col += width;
        offset += row_step;
        inside(col + in_lo, offset, step, count);
      }
      if (in_hi < width) add_padding(col + in_hi, width - in_hi);
    }
  };

  std::vector<WindowAxis> axes_;
  Dims blocks_, block_strides_, window_;
  std::int64_t block_count_ = 1, tap_count_ = 1;
};

}  // namespace dmlops
