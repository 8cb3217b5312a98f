// Convolution throughput: issue 4's layers (those of python/dmlops/bench/convolution.py), forward and
// transposed, float32 (and float16 / float64 for 3x3 layers). The counter is FLOP/s of the direct
// formula (2 x multiply-adds), so layers of different shapes compare.
//
//   dmlops_bench_convolution --benchmark_min_time=0.2 --benchmark_filter=Resnet3x3/F32_64at56
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "bench_support.hpp"
#include "dmlops/core/cpu.hpp"
#include "dmlops/core/direct.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/ops/convolution.hpp"

namespace {

using dmlops::DataType;
using dmlops::Dims;
using dmlops::bench::set_rates;
using dmlops::bench::Buffer;
using dmlops::bench::bytes_of;
using dmlops::bench::packed_view;

// Args: {threads}. x {N, C, H, W}, w {OutC or C, C/G or OutC/G, k, k}, square stride / padding.
void run(benchmark::State& state, DataType dtype, Dims x_sizes, Dims w_sizes, std::int64_t stride,
         std::int64_t padding, std::int64_t groups, dmlops::ConvolutionDirection direction) {
  dmlops::set_num_threads(static_cast<int>(state.range(0)));
  dmlops::ConvolutionDesc desc;
  desc.input = {dtype, x_sizes, std::nullopt};
  desc.filter = {dtype, w_sizes, std::nullopt};
  desc.direction = direction;
  const int spatial = static_cast<int>(x_sizes.size()) - 2;
  desc.strides = Dims::filled(spatial, stride);
  desc.start_padding = desc.end_padding = Dims::filled(spatial, padding);
  desc.group_count = groups;
  const Dims y_sizes = dmlops::infer_output(desc).sizes;
  Buffer x(static_cast<std::size_t>(bytes_of(dtype, x_sizes))), w(static_cast<std::size_t>(bytes_of(dtype, w_sizes)));
  Buffer y(static_cast<std::size_t>(bytes_of(dtype, y_sizes)));
  const auto xv = packed_view(dtype, x_sizes, x.data()), wv = packed_view(dtype, w_sizes, w.data());
  const auto yv = packed_view(dtype, y_sizes, y.data());
  for (auto _ : state) {
    dmlops::execute(desc, xv, wv, nullptr, yv);
    benchmark::ClobberMemory();
  }
  const bool forward = direction == dmlops::ConvolutionDirection::Forward;
  const double reduction = static_cast<double>(w_sizes.product() / w_sizes[0]);
  const double flops = 2.0 * reduction *
                       static_cast<double>(forward ? y_sizes.product() : x_sizes.product());
  state.counters["FLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  set_rates(state, static_cast<double>(bytes_of(dtype, x_sizes) + bytes_of(dtype, w_sizes) + bytes_of(dtype, y_sizes)),
            static_cast<double>(y_sizes.product()));
}

constexpr auto kForward = dmlops::ConvolutionDirection::Forward;
constexpr auto kBackward = dmlops::ConvolutionDirection::Backward;
constexpr auto kF32 = DataType::Float32;

// Issue 4's layers. 3x3 ResNet-50: C -> C at S x S, stride 1 or 2 (then the input is 2S).
void Resnet3x3(benchmark::State& s, DataType dtype, std::int64_t c, std::int64_t size, std::int64_t stride,
               std::int64_t batch = 1) {
  run(s, dtype, {batch, c, size, size}, {c, c, 3, 3}, stride, 1, 1, kForward);
}
void Pointwise(benchmark::State& s, std::int64_t c_in, std::int64_t c_out, std::int64_t size, std::int64_t stride) {
  run(s, kF32, {1, c_in, size, size}, {c_out, c_in, 1, 1}, stride, 0, 1, kForward);
}
void Depthwise(benchmark::State& s, DataType dtype, std::int64_t c, std::int64_t size, std::int64_t stride) {
  run(s, dtype, {1, c, size, size}, {c, 1, 3, 3}, stride, 1, c, kForward);
}

#define DMLOPS_CONV_BENCH(...) \
  BENCHMARK_CAPTURE(__VA_ARGS__)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond)
DMLOPS_CONV_BENCH(Resnet3x3, F32_64at56, kF32, 64, 56, 1);
DMLOPS_CONV_BENCH(Resnet3x3, F32_128at28, kF32, 128, 28, 1);
DMLOPS_CONV_BENCH(Resnet3x3, F32_256at14, kF32, 256, 14, 1);
DMLOPS_CONV_BENCH(Resnet3x3, F32_512at7, kF32, 512, 7, 1);
DMLOPS_CONV_BENCH(Resnet3x3, F32_s2_128at56, kF32, 128, 56, 2);
DMLOPS_CONV_BENCH(Resnet3x3, F32_s2_256at28, kF32, 256, 28, 2);
DMLOPS_CONV_BENCH(Resnet3x3, F32_s2_512at14, kF32, 512, 14, 2);
DMLOPS_CONV_BENCH(Resnet3x3, F32_batch8_128at28, kF32, 128, 28, 1, 8);
DMLOPS_CONV_BENCH(Resnet3x3, F16_64at56, DataType::Float16, 64, 56, 1);
DMLOPS_CONV_BENCH(Resnet3x3, F16_128at28, DataType::Float16, 128, 28, 1);
DMLOPS_CONV_BENCH(Resnet3x3, F64_64at56, DataType::Float64, 64, 56, 1);
DMLOPS_CONV_BENCH(Pointwise, 64to256at56, 64, 256, 56, 1);
DMLOPS_CONV_BENCH(Pointwise, 256to64at56, 256, 64, 56, 1);
DMLOPS_CONV_BENCH(Pointwise, 1024to256at14, 1024, 256, 14, 1);
DMLOPS_CONV_BENCH(Pointwise, s2_512to1024at28, 512, 1024, 28, 2);
DMLOPS_CONV_BENCH(Depthwise, 144at56, kF32, 144, 56, 1);
DMLOPS_CONV_BENCH(Depthwise, s2_144at56, kF32, 144, 56, 2);
DMLOPS_CONV_BENCH(Depthwise, 576at14, kF32, 576, 14, 1);
DMLOPS_CONV_BENCH(Depthwise, s2_576at14, kF32, 576, 14, 2);
DMLOPS_CONV_BENCH(Depthwise, F16_144at56, DataType::Float16, 144, 56, 1);
DMLOPS_CONV_BENCH(Depthwise, F16_s2_576at14, DataType::Float16, 576, 14, 2);
DMLOPS_CONV_BENCH(run, Transposed4x4s2_256to128at16, kF32, {1, 256, 16, 16}, {256, 128, 4, 4}, 2, 1, 1, kBackward);
DMLOPS_CONV_BENCH(run, Conv3d_32at16, kF32, {1, 32, 16, 16, 16}, {32, 32, 3, 3, 3}, 1, 1, 1, kForward);

// The direct kernel alone, its operands in L1: the ceiling a layer's other work (padded planes,
// packing, stores, threads) comes down from. One pass of a 3x3 layer: 14 input channels, 9 taps,
// the widest channel block, 60 outputs in rows of 20 (10 tiles of 6), summed onto the last pass.
void DirectTiles(benchmark::State& state) {
  const std::int64_t channels = 14, taps = 9, width = dmlops::direct_vectors() * dmlops::simd_lanes<float>();
  const std::int64_t row = 22, n = 60;
  std::vector<float> planes(static_cast<std::size_t>(channels * 5 * row), 0.5f), sums(static_cast<std::size_t>(n * width));
  std::vector<float> filter(static_cast<std::size_t>(channels * taps * width), 0.25f);
  std::vector<const float*> sources;
  for (std::int64_t c = 0; c < channels; ++c) sources.push_back(planes.data() + c * 5 * row);
  std::vector<std::int64_t> tap_offsets, offsets;
  for (std::int64_t t = 0; t < taps; ++t) tap_offsets.push_back(t / 3 * row + t % 3);
  for (std::int64_t p = 0; p < n; ++p) offsets.push_back(p / 20 * row + p % 20);
  for (auto _ : state) {
    dmlops::direct_window_product(channels, taps, sources.data(), tap_offsets.data(), offsets.data(), n,
                                  dmlops::direct_vectors(), filter.data(), dmlops::DirectSums{true}, sums.data());
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * channels * taps * width * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(DirectTiles);

// Packing a filter for the direct kernel alone, a pass of 171 input channels (Zen 4's pass of
// 3x3 512@7) of each block of the widest channels at a time. Args {out channels, in channels}:
// 512, 512 is 3x3 512@7's 9.4 MB filter, which a plain call packs from L3 (a prepared one does
// not); 64, 128 fits in L2. Bytes/s counts the filter's bytes once.
void PackDirectFilter(benchmark::State& state) {
  const std::int64_t out = state.range(0), K = state.range(1) * 9, depth = 171 * 9;
  const std::int64_t width = dmlops::direct_vectors() * dmlops::simd_lanes<float>();
  std::vector<float> rows(static_cast<std::size_t>(out * K), 0.5f), packed(static_cast<std::size_t>(depth * width));
  for (auto _ : state) {
    for (std::int64_t o = 0; o < out; o += width) {
      for (std::int64_t k = 0; k < K; k += depth) {
        dmlops::pack_direct_filter(rows.data() + o * K + k, K, width, std::min(depth, K - k), width, packed.data());
        benchmark::DoNotOptimize(packed.data());
      }
    }
  }
  state.counters["bytes/s"] = benchmark::Counter(4.0 * out * K, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(PackDirectFilter)->Args({512, 512})->Args({64, 128});

}  // namespace
