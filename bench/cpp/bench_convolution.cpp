// Convolution throughput: the ResNet layers of bench/compare_conv.py, forward and transposed,
// float32 (and float16 / float64 for the 3x3 layer). The counter is FLOP/s of the direct
// formula (2 x multiply-adds), so layers of different shapes compare.
//
//   dmlops_bench_convolution --benchmark_min_time=0.2 --benchmark_filter=Resnet3x3
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "bench_support.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/ops/convolution.hpp"

namespace {

using dmlops::DataType;
using dmlops::Dims;
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
  desc.strides = {stride, stride};
  desc.start_padding = desc.end_padding = {padding, padding};
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
  const double reduction = static_cast<double>(w_sizes[1] * w_sizes[2] * w_sizes[3]);
  const double flops = 2.0 * reduction *
                       static_cast<double>(forward ? y_sizes.product() : x_sizes.product());
  state.counters["FLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

constexpr auto kForward = dmlops::ConvolutionDirection::Forward;

void BM_Resnet3x3_F32(benchmark::State& s) { run(s, DataType::Float32, {1, 64, 56, 56}, {64, 64, 3, 3}, 1, 1, 1, kForward); }
void BM_Resnet3x3_F16(benchmark::State& s) { run(s, DataType::Float16, {1, 64, 56, 56}, {64, 64, 3, 3}, 1, 1, 1, kForward); }
void BM_Resnet3x3_F64(benchmark::State& s) { run(s, DataType::Float64, {1, 64, 56, 56}, {64, 64, 3, 3}, 1, 1, 1, kForward); }
void BM_Resnet1x1_F32(benchmark::State& s) { run(s, DataType::Float32, {1, 256, 56, 56}, {64, 256, 1, 1}, 1, 0, 1, kForward); }
void BM_Depthwise3x3_F32(benchmark::State& s) { run(s, DataType::Float32, {1, 144, 56, 56}, {144, 1, 3, 3}, 1, 1, 144, kForward); }
void BM_Transposed4x4s2_F32(benchmark::State& s) {
  run(s, DataType::Float32, {1, 64, 28, 28}, {64, 32, 4, 4}, 2, 1, 1, dmlops::ConvolutionDirection::Backward);
}

#define DMLOPS_CONV_BENCH(fn) BENCHMARK(fn)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond)
DMLOPS_CONV_BENCH(BM_Resnet3x3_F32);
DMLOPS_CONV_BENCH(BM_Resnet3x3_F16);
DMLOPS_CONV_BENCH(BM_Resnet3x3_F64);
DMLOPS_CONV_BENCH(BM_Resnet1x1_F32);
DMLOPS_CONV_BENCH(BM_Depthwise3x3_F32);
DMLOPS_CONV_BENCH(BM_Transposed4x4s2_F32);

}  // namespace
