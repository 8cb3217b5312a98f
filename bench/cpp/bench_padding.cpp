// Padding throughput. Padding is memory-bound, so every benchmark reports bytes/s (output
// bytes written + input bytes read) next to BM_Memcpy, a plain copy of the same number of
// output bytes split over the same thread pool: the project's target is >= 70% of that rate.
// BM_PadVsCopy_* measure both side by side and report that percentage (copy_pct) directly.
//
//   dmlops_bench_padding --benchmark_min_time=0.2 --benchmark_filter=F32_NCHW
//   dmlops_bench_padding --benchmark_filter=PadVsCopy_F32_NCHW --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
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
#include "dmlops/ops/padding.hpp"

namespace {

using dmlops::DataType;
using dmlops::Dims;
using dmlops::bench::Buffer;
using dmlops::bench::bytes_of;
using dmlops::bench::packed_view;
using dmlops::bench::set_rates;
using dmlops::PaddingMode;

using ArgList = std::vector<std::int64_t>;
const ArgList kThreads = {1, 2};
const ArgList kAllModes = {0, 1, 2, 3, 4};  // PaddingMode values

struct PadCase {
  const char* name;
  DataType dtype;
  Dims sizes, start, end;
  ArgList modes;
};

const PadCase kCases[] = {
    // The target: an NCHW activation padded by 2 on H and W (a 5x5 convolution's halo).
    {"F32_NCHW", DataType::Float32, {1, 64, 256, 256}, {0, 0, 2, 2}, {0, 0, 2, 2}, kAllModes},
    // The same shape through the 2-byte kernel (FLOAT16 moves as bits).
    {"F16_NCHW", DataType::Float16, {1, 64, 256, 256}, {0, 0, 2, 2}, {0, 0, 2, 2}, {0, 1, 2}},
    // A 1080p uint8 image with a wide border: long rows of 1-byte elements.
    {"U8_Image", DataType::UInt8, {1, 3, 1080, 1920}, {0, 0, 16, 16}, {0, 0, 16, 16}, {0, 1, 2}},
    // One long row: threads must split it by columns, and per-axis setup is O(row).
    {"F64_Vector", DataType::Float64, {10'000'000}, {1000}, {1000}, kAllModes},
    // Pads larger than the input: reflection and symmetric fold several times.
    {"F32_LargePads", DataType::Float32, {1, 64, 32, 32}, {0, 0, 64, 64}, {0, 0, 64, 64}, kAllModes},
    // NCDHW padded on three axes: whole padded planes are fills or plane copies.
    {"F32_5D", DataType::Float32, {2, 8, 16, 64, 64}, {0, 0, 1, 1, 1}, {0, 0, 1, 1, 1}, {0, 1, 2}},
};

std::int64_t output_bytes(const PadCase& c) {
  Dims out;
  for (int d = 0; d < c.sizes.size(); ++d) out.push_back(c.sizes[d] + c.start[d] + c.end[d]);
  return bytes_of(c.dtype, out);
}

// One padding problem with its buffers, made once outside the timed loop.
struct PadProblem {
  dmlops::PaddingDesc desc;
  std::int64_t in_bytes = 0, out_bytes = 0;
  Buffer in, out;
  dmlops::TensorView in_view, out_view;

  PadProblem(const PadCase& c, PaddingMode mode)
      : desc(make_desc(c, mode)),
        in_bytes(bytes_of(c.dtype, c.sizes)),
        out_bytes(output_bytes(c)),
        in(static_cast<std::size_t>(in_bytes)),
        out(static_cast<std::size_t>(out_bytes)),
        in_view(packed_view(c.dtype, c.sizes, in.data())),
        out_view(packed_view(c.dtype, dmlops::infer_output(desc).sizes, out.data())) {}
  void run() const { dmlops::execute(desc, in_view, out_view); }

  static dmlops::PaddingDesc make_desc(const PadCase& c, PaddingMode mode) {
    dmlops::PaddingDesc desc;
    desc.input = {c.dtype, c.sizes, std::nullopt};
    desc.mode = mode;
    desc.value = dmlops::Scalar::exact(c.dtype, dmlops::Number::from_int(0), "value");
    desc.start_padding = c.start;
    desc.end_padding = c.end;
    return desc;
  }
};

// memcpy of `bytes` spread over dmlops' own pool: the ceiling for padding. Two ways, since
// which is faster depends on the size and the machine: 256 KiB pieces (glibc copies them
// with ordinary stores, good while source and destination fit in the last-level cache), or
// one piece per thread (glibc's non-temporal path for pieces far beyond the cache).
class ParallelCopy {
 public:
  enum Pieces { kSmallPieces, kOnePerThread };
  ParallelCopy(std::int64_t bytes, Pieces pieces)
      : bytes_(bytes),
        piece_(pieces == kSmallPieces ? kSmallPiece : (bytes + dmlops::num_threads() - 1) / dmlops::num_threads()),
        src_(static_cast<std::size_t>(bytes)),
        dst_(static_cast<std::size_t>(bytes)) {}
  void run() const {
    dmlops::parallel_for(0, (bytes_ + piece_ - 1) / piece_, 1, [this](std::int64_t b, std::int64_t e) {
      const std::int64_t lo = b * piece_, hi = std::min(bytes_, e * piece_);
      std::memcpy(dst_.data() + lo, src_.data() + lo, static_cast<std::size_t>(hi - lo));
    });
  }

 private:
  static constexpr std::int64_t kSmallPiece = 256 * 1024;
  std::int64_t bytes_, piece_;
  Buffer src_, dst_;
};

benchmark::Counter rate(double bytes_per_iteration, const benchmark::State& state) {
  return benchmark::Counter(bytes_per_iteration * static_cast<double>(state.iterations()),
                            benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
}

std::string label(const PadCase& c, PaddingMode mode) {
  return std::string(dmlops::name(mode)) + " " + std::string(dmlops::name(c.dtype));
}

// Args: {mode, threads}. bytes/s = (output bytes written + input bytes read) per second.
void BM_Pad(benchmark::State& state, const PadCase& c) {
  const auto mode = static_cast<PaddingMode>(state.range(0));
  dmlops::set_num_threads(static_cast<int>(state.range(1)));
  const PadProblem problem(c, mode);
  problem.run();  // starts the thread pool outside the timing
  for (auto _ : state) {
    problem.run();
    benchmark::ClobberMemory();
  }
  state.SetLabel(label(c, mode));
  set_rates(state, static_cast<double>(problem.in_bytes + problem.out_bytes),
            static_cast<double>(problem.out_view.sizes.product()));
}

// Args: {mode, threads}. Padding and copies of its output bytes (both ways of ParallelCopy)
// measured in alternating blocks of kBlock calls (the first call of each block untimed, so
// each block runs with warm caches). All see the same moments of a shared, noisy machine, so
// copy_pct - padding's bytes/s as a percentage of the faster copy's - is steadier than a
// ratio of two separate runs. The reported time is padding's alone.
void BM_PadVsCopy(benchmark::State& state, const PadCase& c) {
  using Clock = std::chrono::steady_clock;
  constexpr int kBlock = 8;
  const auto mode = static_cast<PaddingMode>(state.range(0));
  dmlops::set_num_threads(static_cast<int>(state.range(1)));
  const PadProblem problem(c, mode);
  const ParallelCopy small_pieces(problem.out_bytes, ParallelCopy::kSmallPieces);
  const ParallelCopy one_per_thread(problem.out_bytes, ParallelCopy::kOnePerThread);
  double pad_seconds = 0, copy_seconds = 0;
  const auto block = [](const auto& op) {
    op.run();
    const auto t0 = Clock::now();
    for (int i = 0; i < kBlock; ++i) op.run();
    benchmark::ClobberMemory();
    return std::chrono::duration<double>(Clock::now() - t0).count() / kBlock;
  };
  for (auto _ : state) {
    const double pad = block(problem);
    copy_seconds += std::min(block(small_pieces), block(one_per_thread));
    pad_seconds += pad;
    state.SetIterationTime(pad);
  }
  const double iterations = static_cast<double>(state.iterations());
  const double pad_rate = static_cast<double>(problem.in_bytes + problem.out_bytes) * iterations / pad_seconds;
  const double copy_rate = 2.0 * static_cast<double>(problem.out_bytes) * iterations / copy_seconds;
  state.SetLabel(label(c, mode));
  set_rates(state, static_cast<double>(problem.in_bytes + problem.out_bytes),
            static_cast<double>(problem.out_view.sizes.product()));
  state.counters["copy_bytes/s"] = benchmark::Counter(copy_rate, benchmark::Counter::kDefaults,
                                                      benchmark::Counter::kIs1024);
  state.counters["copy_pct"] = 100.0 * pad_rate / copy_rate;
}

// Args: {bytes, threads, pieces}. The ceiling: a copy of `bytes` (a case's output size) over
// the same pool, pieces 0 = 256 KiB pieces, 1 = one piece per thread (see ParallelCopy).
// bytes/s counts the read and the write (2 x bytes), comparable with the padding counters.
void BM_Memcpy(benchmark::State& state) {
  dmlops::set_num_threads(static_cast<int>(state.range(1)));
  const ParallelCopy copy(state.range(0), static_cast<ParallelCopy::Pieces>(state.range(2)));
  copy.run();  // starts the thread pool outside the timing
  for (auto _ : state) {
    copy.run();
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = rate(2.0 * static_cast<double>(state.range(0)), state);
}

// Registered from kCases so that every case has its copy baseline (same output bytes).
const bool kRegistered = [] {
  ArgList copy_bytes;
  for (const PadCase& c : kCases) {
    benchmark::RegisterBenchmark((std::string("BM_Pad_") + c.name).c_str(),
                                 [&c](benchmark::State& state) { BM_Pad(state, c); })
        ->ArgNames({"mode", "threads"})
        ->ArgsProduct({c.modes, kThreads})
        ->UseRealTime();
    if (std::find(copy_bytes.begin(), copy_bytes.end(), output_bytes(c)) == copy_bytes.end())
      copy_bytes.push_back(output_bytes(c));
  }
  benchmark::RegisterBenchmark("BM_Memcpy", BM_Memcpy)
      ->ArgNames({"bytes", "threads", "pieces"})
      ->ArgsProduct({copy_bytes, kThreads, {ParallelCopy::kSmallPieces, ParallelCopy::kOnePerThread}})
      ->UseRealTime();
  for (const PadCase& c : kCases) {
    benchmark::RegisterBenchmark((std::string("BM_PadVsCopy_") + c.name).c_str(),
                                 [&c](benchmark::State& state) { BM_PadVsCopy(state, c); })
        ->ArgNames({"mode", "threads"})
        ->ArgsProduct({c.modes, kThreads})
        ->UseManualTime();
  }
  return true;
}();

}  // namespace
