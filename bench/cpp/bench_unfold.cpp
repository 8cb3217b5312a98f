// Unfold / Fold throughput. Unfold is data movement: it reads each input element up to K times
// (from cache) and writes the K-times-larger output once, so its counter is output bytes
// written per second, next to BM_Memcpy of the same number of bytes over the same thread pool
// (whose counter is bytes copied per second). Fold reads the columns once and writes the
// K-times-smaller output; its counter is input bytes read per second.
//
//   dmlops_bench_unfold --benchmark_min_time=0.2 --benchmark_filter=NCHW
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

#include "bench_support.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/core/tensor.hpp"
#include "dmlops/ops/unfold.hpp"

namespace {

using dmlops::DataType;
using dmlops::Dims;
using dmlops::bench::Buffer;
using dmlops::bench::bytes_of;
using dmlops::bench::packed_view;
using dmlops::bench::set_rates;

using ArgList = std::vector<std::int64_t>;
const ArgList kThreads = {1, 2};

struct Window {
  Dims window, strides, dilations, start, end;
};

template <class Desc>
void set_window(Desc& desc, const Window& w) {
  desc.window_sizes = w.window;
  desc.strides = w.strides;
  desc.dilations = w.dilations;
  desc.start_padding = w.start;
  desc.end_padding = w.end;
}

// Args: {threads}.
void run_unfold(benchmark::State& state, DataType dtype, const Dims& sizes, const Window& w) {
  dmlops::set_num_threads(static_cast<int>(state.range(0)));
  dmlops::UnfoldDesc desc;
  desc.input = {dtype, sizes, std::nullopt};
  set_window(desc, w);
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
  state.SetLabel(std::string(dmlops::name(dtype)) + " out " + std::to_string(out_bytes >> 10) + " KiB");
  state.counters["out_bytes/s"] = benchmark::Counter(static_cast<double>(out_bytes) * static_cast<double>(state.iterations()),
                                                     benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
  set_rates(state, static_cast<double>(in_bytes + out_bytes), static_cast<double>(out_desc.sizes.product()));
}

// Args: {threads}. `spatial` are the output's spatial sizes.
void run_fold(benchmark::State& state, DataType dtype, const Dims& sizes, const Window& w) {
  dmlops::set_num_threads(static_cast<int>(state.range(0)));
  dmlops::UnfoldDesc unfold;  // the fold's input is the unfold's output
  unfold.input = {dtype, sizes, std::nullopt};
  set_window(unfold, w);
  dmlops::FoldDesc desc;
  desc.input = dmlops::infer_output(unfold);
  desc.output = {dtype, sizes, std::nullopt};
  set_window(desc, w);
  const std::int64_t in_bytes = bytes_of(dtype, desc.input.sizes), out_bytes = bytes_of(dtype, sizes);
  Buffer in(static_cast<std::size_t>(in_bytes)), out(static_cast<std::size_t>(out_bytes));
  const dmlops::TensorView in_view = packed_view(dtype, desc.input.sizes, in.data());
  const dmlops::TensorView out_view = packed_view(dtype, sizes, out.data());
  dmlops::execute(desc, in_view, out_view);
  for (auto _ : state) {
    dmlops::execute(desc, in_view, out_view);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(dmlops::name(dtype)) + " in " + std::to_string(in_bytes >> 10) + " KiB");
  state.counters["in_bytes/s"] = benchmark::Counter(static_cast<double>(in_bytes) * static_cast<double>(state.iterations()),
                                                    benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
  set_rates(state, static_cast<double>(in_bytes + out_bytes), static_cast<double>(sizes.product()));
}

// The target case: a ResNet activation, 3x3 window, padding 1 (a 3x3 convolution's im2col).
const Window k3x3Pad1{{3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}};
void BM_Unfold_F32_NCHW_3x3(benchmark::State& state) { run_unfold(state, DataType::Float32, {1, 64, 56, 56}, k3x3Pad1); }
BENCHMARK(BM_Unfold_F32_NCHW_3x3)->ArgNames({"threads"})->ArgsProduct({kThreads})->UseRealTime();
void BM_Fold_F32_NCHW_3x3(benchmark::State& state) { run_fold(state, DataType::Float32, {1, 64, 56, 56}, k3x3Pad1); }
BENCHMARK(BM_Fold_F32_NCHW_3x3)->ArgNames({"threads"})->ArgsProduct({kThreads})->UseRealTime();

// Same geometry in float16: unfold moves 2-byte bits; fold converts to float32 and back.
void BM_Unfold_F16_NCHW_3x3(benchmark::State& state) { run_unfold(state, DataType::Float16, {1, 64, 56, 56}, k3x3Pad1); }
BENCHMARK(BM_Unfold_F16_NCHW_3x3)->ArgNames({"threads"})->ArgsProduct({kThreads})->UseRealTime();
void BM_Fold_F16_NCHW_3x3(benchmark::State& state) { run_fold(state, DataType::Float16, {1, 64, 56, 56}, k3x3Pad1); }
BENCHMARK(BM_Fold_F16_NCHW_3x3)->ArgNames({"threads"})->ArgsProduct({kThreads})->UseRealTime();

// Stride 2 (a downsampling convolution): every run is a strided read.
const Window k3x3Stride2{{3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}};
void BM_Unfold_F32_NCHW_3x3_Stride2(benchmark::State& state) {
  run_unfold(state, DataType::Float32, {1, 64, 112, 112}, k3x3Stride2);
}
BENCHMARK(BM_Unfold_F32_NCHW_3x3_Stride2)->ArgNames({"threads"})->ArgsProduct({kThreads})->UseRealTime();

// 3-D: 1x16x32x32x32 with a 3x3x3 window (short 30-element runs, 27 taps).
const Window k3x3x3{{3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}};
void BM_Unfold_F32_3D_3x3x3(benchmark::State& state) { run_unfold(state, DataType::Float32, {1, 16, 32, 32, 32}, k3x3x3); }
BENCHMARK(BM_Unfold_F32_3D_3x3x3)->ArgNames({"threads"})->ArgsProduct({kThreads})->UseRealTime();
void BM_Fold_F32_3D_3x3x3(benchmark::State& state) { run_fold(state, DataType::Float32, {1, 16, 32, 32, 32}, k3x3x3); }
BENCHMARK(BM_Fold_F32_3D_3x3x3)->ArgNames({"threads"})->ArgsProduct({kThreads})->UseRealTime();

// Few planes, one long 1-D signal: the rows must be split between threads by blocks.
const Window k1d{{16}, {4}, {1}, {8}, {8}};
void BM_Unfold_U8_1D_Signal(benchmark::State& state) { run_unfold(state, DataType::UInt8, {1, 1, 4'000'000}, k1d); }
BENCHMARK(BM_Unfold_U8_1D_Signal)->ArgNames({"threads"})->ArgsProduct({kThreads})->UseRealTime();
void BM_Fold_I32_1D_Signal(benchmark::State& state) { run_fold(state, DataType::Int32, {1, 1, 4'000'000}, k1d); }
BENCHMARK(BM_Fold_I32_1D_Signal)->ArgNames({"threads"})->ArgsProduct({kThreads})->UseRealTime();

// Args: {bytes, threads}. The ceiling: memcpy of `bytes` in 256 KiB pieces over the same pool;
// the counter is bytes copied per second (compare with unfold's output bytes per second).
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
  state.counters["out_bytes/s"] = benchmark::Counter(static_cast<double>(bytes) * static_cast<double>(state.iterations()),
                                                     benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
}
// Output bytes of: NCHW_3x3 (1x576x3136 x 4), 3D_3x3x3 (1x432x27000 x 4).
BENCHMARK(BM_Memcpy)
    ->ArgNames({"bytes", "threads"})
    ->ArgsProduct({ArgList{576 * 3136 * 4, 432 * 27000 * 4}, kThreads})
    ->UseRealTime();

}  // namespace
