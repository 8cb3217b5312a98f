// Lp pooling throughput. Every benchmark reports input bytes read per second; BM_Memcpy is a
// plain copy of the same input bytes over the same thread pool (its bytes/s counts the read and
// the write). The target for the 1x64x112x112 case (window 3x3, stride 2, padding 1,
// p = 2) is at most twice the copy's time.
//
//   dmlops_bench_lp_pooling --benchmark_min_time=0.2 --benchmark_filter=F32_ResNetStem
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "dmlops/core/half.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/core/tensor.hpp"
#include "dmlops/ops/lp_pooling.hpp"

namespace {

using dmlops::DataType;
using dmlops::Dims;
using dmlops::bench::set_rates;
using dmlops::bench::Buffer;
using dmlops::bench::bytes_of;
using dmlops::bench::packed_view;

using ArgList = std::vector<std::int64_t>;
const ArgList kThreads = {1, 2};

// Normally distributed values, like activations: for p = 30 that keeps the timed work on the
// common path (tiny values would make every window's |x|^30 underflow and take the repairs).
void fill_normal(DataType dtype, std::byte* data, std::int64_t count) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal;
  for (std::int64_t i = 0; i < count; ++i) {
    const float v = normal(rng);
    if (dtype == DataType::Float32) {
      std::memcpy(data + 4 * i, &v, 4);
    } else if (dtype == DataType::Float64) {
      const double d = v;
      std::memcpy(data + 8 * i, &d, 8);
    } else {
      const std::uint16_t h = dmlops::float_to_half_bits(v);
      std::memcpy(data + 2 * i, &h, 2);
    }
  }
}

struct Case {
  DataType dtype;
  Dims sizes, window, strides, start, end, dilations;
};

// Args: {p, threads}.
void run_lp_pooling(benchmark::State& state, const Case& c) {
  dmlops::set_num_threads(static_cast<int>(state.range(1)));
  dmlops::LpPoolingDesc desc;
  desc.input = {c.dtype, c.sizes, std::nullopt};
  desc.window_size = c.window;
  desc.strides = c.strides;
  desc.start_padding = c.start;
  desc.end_padding = c.end;
  desc.dilations = c.dilations;
  desc.p = state.range(0);
  const dmlops::TensorDesc out_desc = dmlops::infer_output(desc);

  const std::int64_t in_bytes = bytes_of(c.dtype, c.sizes);
  const Buffer in(static_cast<std::size_t>(in_bytes));
  const Buffer out(static_cast<std::size_t>(bytes_of(c.dtype, out_desc.sizes)));
  fill_normal(c.dtype, in.data(), c.sizes.product());
  const dmlops::TensorView in_view = packed_view(c.dtype, c.sizes, in.data());
  const dmlops::TensorView out_view = packed_view(c.dtype, out_desc.sizes, out.data());
  dmlops::execute(desc, in_view, out_view);  // starts the thread pool outside the timing

  for (auto _ : state) {
    dmlops::execute(desc, in_view, out_view);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(dmlops::name(c.dtype)));
  state.counters["in_bytes/s"] =
      benchmark::Counter(static_cast<double>(in_bytes) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
  set_rates(state, static_cast<double>(in_bytes + bytes_of(c.dtype, out_desc.sizes)),
            static_cast<double>(out_desc.sizes.product()));
}

// The case: ResNet's stem pooling geometry on a 64-channel 112x112 activation.
const Case kStem{DataType::Float32, {1, 64, 112, 112}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, Dims{1, 1}};

void BM_LpPool_F32_ResNetStem(benchmark::State& state) { run_lp_pooling(state, kStem); }
BENCHMARK(BM_LpPool_F32_ResNetStem)->ArgNames({"p", "threads"})->ArgsProduct({{1, 2, 3, 30}, kThreads})->UseRealTime();

// The same without padding: what torch.nn.functional.lp_pool2d can compute.
void BM_LpPool_F32_ResNetStemUnpadded(benchmark::State& state) {
  Case c = kStem;
  c.start = c.end = {0, 0};
  run_lp_pooling(state, c);
}
BENCHMARK(BM_LpPool_F32_ResNetStemUnpadded)->ArgNames({"p", "threads"})->ArgsProduct({{2}, kThreads})->UseRealTime();

void BM_LpPool_F16_ResNetStem(benchmark::State& state) {
  Case c = kStem;
  c.dtype = DataType::Float16;
  run_lp_pooling(state, c);
}
BENCHMARK(BM_LpPool_F16_ResNetStem)->ArgNames({"p", "threads"})->ArgsProduct({{2, 3}, kThreads})->UseRealTime();

void BM_LpPool_F64_ResNetStem(benchmark::State& state) {
  Case c = kStem;
  c.dtype = DataType::Float64;
  run_lp_pooling(state, c);
}
BENCHMARK(BM_LpPool_F64_ResNetStem)->ArgNames({"p", "threads"})->ArgsProduct({{2}, kThreads})->UseRealTime();

// Overlapping stride-1 windows (every input element in 9 windows).
void BM_LpPool_F32_Stride1(benchmark::State& state) {
  run_lp_pooling(state, {DataType::Float32, {1, 64, 56, 56}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, Dims{1, 1}});
}
BENCHMARK(BM_LpPool_F32_Stride1)->ArgNames({"p", "threads"})->ArgsProduct({{2}, kThreads})->UseRealTime();

// 5-D, dilated: the second example at a realistic size.
void BM_LpPool_F32_5D_Dilated(benchmark::State& state) {
  run_lp_pooling(state, {DataType::Float32, {1, 16, 32, 64, 64}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0},
                         Dims{2, 2, 2}});
}
BENCHMARK(BM_LpPool_F32_5D_Dilated)->ArgNames({"p", "threads"})->ArgsProduct({{2, 3}, kThreads})->UseRealTime();

// Args: {bytes, threads}. The ceiling: memcpy of the input's bytes over the same pool.
void BM_Memcpy(benchmark::State& state) { dmlops::bench::time_memcpy(state); }
// Input bytes of the F32 ResNet stem (1x64x112x112x4) and the 5-D case (16x32x64x64x4).
BENCHMARK(BM_Memcpy)
    ->ArgNames({"bytes", "threads"})
    ->ArgsProduct({ArgList{64 * 112 * 112 * 4, 16 * 32 * 64 * 64 * 4}, kThreads})
    ->UseRealTime();

}  // namespace
