// Padding throughput. Padding is memory-bound, so every benchmark reports bytes/s (output
// bytes written + input bytes read) next to BM_Memcpy, a plain copy of the same number of
// output bytes split over the same thread pool: design.md's target is >= 70% of that rate.
//
//   dmlops_bench_padding --benchmark_min_time=0.2 --benchmark_filter=F32_NCHW
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "dmlops/core/parallel.hpp"
#include "dmlops/core/tensor.hpp"
#include "dmlops/ops/padding.hpp"

namespace {

using dmlops::DataType;
using dmlops::Dims;
using dmlops::PaddingMode;

using ArgList = std::vector<std::int64_t>;
const ArgList kThreads = {1, 2};
const ArgList kAllModes = {0, 1, 2, 3, 4};  // PaddingMode values

// 64-byte aligned and already touched, so neither page faults nor a misaligned start are
// timed.
class Buffer {
 public:
  explicit Buffer(std::size_t bytes)
      : data_(static_cast<std::byte*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64))) {
    if (!data_) throw std::bad_alloc();
    for (std::size_t i = 0; i < bytes; ++i) data_.get()[i] = static_cast<std::byte>(i * 131 + 7);
  }
  std::byte* data() const { return data_.get(); }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data_;
};

dmlops::TensorView packed_view(DataType dtype, const Dims& sizes, void* data) {
  dmlops::TensorView view{dtype, sizes, dmlops::packed_strides(sizes), data};
  for (std::int64_t& s : view.byte_strides) s *= static_cast<std::int64_t>(dmlops::element_size(dtype));
  return view;
}

std::int64_t bytes_of(DataType dtype, const Dims& sizes) {
  return sizes.product() * static_cast<std::int64_t>(dmlops::element_size(dtype));
}

// Args: {mode, threads}.
void run_padding(benchmark::State& state, DataType dtype, const Dims& sizes, const Dims& start,
                 const Dims& end) {
  const auto mode = static_cast<PaddingMode>(state.range(0));
  dmlops::set_num_threads(static_cast<int>(state.range(1)));

  dmlops::PaddingDesc desc;
  desc.input = {dtype, sizes, std::nullopt};
  desc.mode = mode;
  desc.value = dmlops::Scalar::exact(dtype, dmlops::Number::from_int(0), "value");
  desc.start_padding = start;
  desc.end_padding = end;
  const dmlops::TensorDesc out_desc = dmlops::infer_output(desc);

  const std::int64_t in_bytes = bytes_of(dtype, sizes), out_bytes = bytes_of(dtype, out_desc.sizes);
  Buffer in(static_cast<std::size_t>(in_bytes)), out(static_cast<std::size_t>(out_bytes));
  const dmlops::TensorView in_view = packed_view(dtype, sizes, in.data());
  const dmlops::TensorView out_view = packed_view(dtype, out_desc.sizes, out.data());
  dmlops::execute(desc, in_view, out_view);  // starts the thread pool outside the timing

  for (auto _ : state) {
    dmlops::execute(desc, in_view, out_view);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(dmlops::name(mode)) + " " + std::string(dmlops::name(dtype)));
  state.counters["bytes/s"] = benchmark::Counter(
      static_cast<double>(in_bytes + out_bytes) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
}

// The target case: an NCHW activation padded by 2 on H and W (a 5x5 convolution's halo).
void BM_Pad_F32_NCHW(benchmark::State& state) {
  run_padding(state, DataType::Float32, {1, 64, 256, 256}, {0, 0, 2, 2}, {0, 0, 2, 2});
}
BENCHMARK(BM_Pad_F32_NCHW)->ArgNames({"mode", "threads"})->ArgsProduct({kAllModes, kThreads})->UseRealTime();

// Same bytes per row pattern at half the element size: the 2-byte kernel (FLOAT16 moves as bits).
void BM_Pad_F16_NCHW(benchmark::State& state) {
  run_padding(state, DataType::Float16, {1, 64, 256, 256}, {0, 0, 2, 2}, {0, 0, 2, 2});
}
BENCHMARK(BM_Pad_F16_NCHW)->ArgNames({"mode", "threads"})->ArgsProduct({ArgList{0, 2}, kThreads})->UseRealTime();

// A 1080p uint8 image with a wide border: long rows, 1-byte elements.
void BM_Pad_U8_Image(benchmark::State& state) {
  run_padding(state, DataType::UInt8, {1, 3, 1080, 1920}, {0, 0, 16, 16}, {0, 0, 16, 16});
}
BENCHMARK(BM_Pad_U8_Image)->ArgNames({"mode", "threads"})->ArgsProduct({ArgList{0, 1, 2}, kThreads})->UseRealTime();

// One long row: the work must be split across threads by columns, not rows.
void BM_Pad_F64_Vector(benchmark::State& state) {
  run_padding(state, DataType::Float64, {10'000'000}, {1000}, {1000});
}
BENCHMARK(BM_Pad_F64_Vector)->ArgNames({"mode", "threads"})->ArgsProduct({kAllModes, kThreads})->UseRealTime();

// Pads larger than the input (reflection and symmetric fold several times): most of the
// output is padding, read through the short mirrored runs.
void BM_Pad_F32_LargePads(benchmark::State& state) {
  run_padding(state, DataType::Float32, {1, 64, 32, 32}, {0, 0, 64, 64}, {0, 0, 64, 64});
}
BENCHMARK(BM_Pad_F32_LargePads)->ArgNames({"mode", "threads"})->ArgsProduct({kAllModes, kThreads})->UseRealTime();

// Padding on three axes of a 5-D tensor (NCDHW): whole padded planes are fills or plane copies.
void BM_Pad_F32_5D(benchmark::State& state) {
  run_padding(state, DataType::Float32, {2, 8, 16, 64, 64}, {0, 0, 1, 1, 1}, {0, 0, 1, 1, 1});
}
BENCHMARK(BM_Pad_F32_5D)->ArgNames({"mode", "threads"})->ArgsProduct({ArgList{0, 1, 2}, kThreads})->UseRealTime();

// Args: {bytes, threads}. The ceiling: memcpy of `bytes` in 256 KiB pieces over the same pool.
// bytes/s counts the read and the write (2 x bytes), comparable with the padding counters.
void BM_Memcpy(benchmark::State& state) {
  const std::int64_t bytes = state.range(0);
  dmlops::set_num_threads(static_cast<int>(state.range(1)));
  Buffer src(static_cast<std::size_t>(bytes)), dst(static_cast<std::size_t>(bytes));
  constexpr std::int64_t kPiece = 256 * 1024;
  const std::int64_t pieces = (bytes + kPiece - 1) / kPiece;
  const auto copy = [&](std::int64_t b, std::int64_t e) {
    const std::int64_t lo = b * kPiece, hi = std::min(bytes, e * kPiece);
    std::memcpy(dst.data() + lo, src.data() + lo, static_cast<std::size_t>(hi - lo));
  };
  dmlops::parallel_for(0, pieces, 1, copy);
  for (auto _ : state) {
    dmlops::parallel_for(0, pieces, 1, copy);
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = benchmark::Counter(
      2.0 * static_cast<double>(bytes) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
}
// Output bytes of: F32_NCHW (1x64x260x260x4), U8_Image (1x3x1112x1952), F64_Vector (10'002'000x8).
BENCHMARK(BM_Memcpy)
    ->ArgNames({"bytes", "threads"})
    ->ArgsProduct({ArgList{64 * 260 * 260 * 4, 3 * 1112 * 1952, 10'002'000 * 8}, kThreads})
    ->UseRealTime();

}  // namespace
