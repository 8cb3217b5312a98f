// Upsample2D / Resample throughput. Nearest upsampling only moves data, so it reports bytes/s
// (output bytes written + input bytes read) next to BM_Memcpy, a plain copy of the same number
// of output bytes over the same thread pool (the target: >= 70% of that rate). Linear
// modes report output elements/s.
//
//   dmlops_bench_resample --benchmark_min_time=0.2 --benchmark_filter=Upsample2D_F32
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/core/tensor.hpp"
#include "dmlops/ops/resample.hpp"

namespace {

using dmlops::DataType;
using dmlops::Dims;
using dmlops::bench::set_rates;
using dmlops::InterpolationMode;
using dmlops::bench::Buffer;
using dmlops::bench::bytes_of;
using dmlops::bench::packed_view;

using ArgList = std::vector<std::int64_t>;
const ArgList kThreads = {1, 2};
const ArgList kModes = {0, 1};  // InterpolationMode values

// Times execute(desc) on packed buffers; bytes/s counts output + input bytes, elements/s outputs.
template <class Desc>
void time_execute(benchmark::State& state, const Desc& desc, const std::string& label) {
  const dmlops::TensorDesc out_desc = dmlops::infer_output(desc);
  const DataType dtype = desc.input.dtype;
  const std::int64_t in_bytes = bytes_of(dtype, desc.input.sizes), out_bytes = bytes_of(dtype, out_desc.sizes);
  Buffer in(static_cast<std::size_t>(in_bytes)), out(static_cast<std::size_t>(out_bytes));
  const dmlops::TensorView in_view = packed_view(dtype, desc.input.sizes, in.data());
  const dmlops::TensorView out_view = packed_view(dtype, out_desc.sizes, out.data());
  dmlops::execute(desc, in_view, out_view);  // starts the thread pool outside the timing
  for (auto _ : state) {
    dmlops::execute(desc, in_view, out_view);
    benchmark::ClobberMemory();
  }
  state.SetLabel(label + " " + std::string(dmlops::name(dtype)));
  set_rates(state, static_cast<double>(in_bytes + out_bytes), static_cast<double>(out_desc.element_count()));
}

// Args: {mode, threads}.
void run_upsample(benchmark::State& state, DataType dtype, const Dims& sizes, std::int64_t scale) {
  dmlops::set_num_threads(static_cast<int>(state.range(1)));
  dmlops::Upsample2DDesc desc;
  desc.input = {dtype, sizes, std::nullopt};
  desc.scale_height = desc.scale_width = scale;
  desc.mode = static_cast<InterpolationMode>(state.range(0));
  time_execute(state, desc, std::string(dmlops::name(desc.mode)) + " x" + std::to_string(scale));
}

// The target cases: float32 1x64x128x128 and 1x16x8x64x64, x2.
void BM_Upsample2D_F32_NCHW(benchmark::State& state) { run_upsample(state, DataType::Float32, {1, 64, 128, 128}, 2); }
BENCHMARK(BM_Upsample2D_F32_NCHW)->ArgNames({"mode", "threads"})->ArgsProduct({kModes, kThreads})->UseRealTime();

void BM_Upsample2D_F32_NCDHW(benchmark::State& state) { run_upsample(state, DataType::Float32, {1, 16, 8, 64, 64}, 2); }
BENCHMARK(BM_Upsample2D_F32_NCDHW)->ArgNames({"mode", "threads"})->ArgsProduct({kModes, kThreads})->UseRealTime();

// float16: nearest moves 2-byte words; linear converts with F16C and rounds once.
void BM_Upsample2D_F16_NCHW(benchmark::State& state) { run_upsample(state, DataType::Float16, {1, 64, 128, 128}, 2); }
BENCHMARK(BM_Upsample2D_F16_NCHW)->ArgNames({"mode", "threads"})->ArgsProduct({kModes, kThreads})->UseRealTime();

// x3 (the repeat kernel for k = 3) and x8 (broadcast runs) on a uint8 image.
void BM_Upsample2D_U8_x3(benchmark::State& state) { run_upsample(state, DataType::UInt8, {1, 3, 360, 640}, 3); }
BENCHMARK(BM_Upsample2D_U8_x3)->ArgNames({"mode", "threads"})->ArgsProduct({ArgList{0}, kThreads})->UseRealTime();
void BM_Upsample2D_F32_x8(benchmark::State& state) { run_upsample(state, DataType::Float32, {1, 16, 32, 32}, 8); }
BENCHMARK(BM_Upsample2D_F32_x8)->ArgNames({"mode", "threads"})->ArgsProduct({kModes, kThreads})->UseRealTime();

// Args: {mode, threads}. Resample of the last two axes of an NCHW tensor.
void run_resample(benchmark::State& state, const Dims& sizes, float scale_h, float scale_w, bool antialiased) {
  dmlops::set_num_threads(static_cast<int>(state.range(1)));
  dmlops::ResampleDesc desc;
  desc.input = {DataType::Float32, sizes, std::nullopt};
  desc.mode = static_cast<InterpolationMode>(state.range(0));
  desc.scales = {1.0f, 1.0f, scale_h, scale_w};
  desc.antialiased = antialiased;
  time_execute(state, desc, std::string(dmlops::name(desc.mode)) + (antialiased ? " antialiased" : ""));
}

// A fractional scale: irregular nearest maps (gather runs), 2-tap linear tables.
void BM_Resample_F32_x1_75(benchmark::State& state) { run_resample(state, {1, 64, 128, 128}, 1.75f, 1.75f, false); }
BENCHMARK(BM_Resample_F32_x1_75)->ArgNames({"mode", "threads"})->ArgsProduct({kModes, kThreads})->UseRealTime();

// Downsampling by 4 with antialiasing: 8-tap triangles on both axes.
void BM_Resample_F32_Antialiased_Quarter(benchmark::State& state) {
  run_resample(state, {1, 16, 512, 512}, 0.25f, 0.25f, true);
}
BENCHMARK(BM_Resample_F32_Antialiased_Quarter)->ArgNames({"mode", "threads"})->ArgsProduct({ArgList{1}, kThreads})->UseRealTime();

void BM_Memcpy(benchmark::State& state) { dmlops::bench::time_memcpy(state); }
// Output bytes of the target cases: 1x64x256x256 and 1x16x8x128x128 float32.
BENCHMARK(BM_Memcpy)
    ->ArgNames({"bytes", "threads"})
    ->ArgsProduct({ArgList{64 * 256 * 256 * 4, 16 * 8 * 128 * 128 * 4}, kThreads})
    ->UseRealTime();

}  // namespace
