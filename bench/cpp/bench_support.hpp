// Helpers shared by the Google Benchmark files: pre-touched aligned buffers, packed views,
// and the plain-copy ceiling that data-movement benchmarks are compared with.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "dmlops/core/parallel.hpp"
#include "dmlops/core/tensor.hpp"

namespace dmlops::bench {

// 64-byte aligned and already touched, so neither page faults nor a misaligned start are timed.
// The bytes are small integers and 0x3c alternately: valid, normal values in every float format.
class Buffer {
 public:
  explicit Buffer(std::size_t bytes)
      : data_(static_cast<std::byte*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64))) {
    if (!data_) throw std::bad_alloc();
    for (std::size_t i = 0; i < bytes; ++i) data_.get()[i] = static_cast<std::byte>(i % 2 ? 0x3c : (i * 7) % 64);
  }
  std::byte* data() const { return data_.get(); }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data_;
};

inline TensorView packed_view(DataType dtype, const Dims& sizes, void* data) {
  TensorView view{dtype, sizes, packed_strides(sizes), data};
  for (std::int64_t& s : view.byte_strides) s *= static_cast<std::int64_t>(element_size(dtype));
  return view;
}

inline std::int64_t bytes_of(DataType dtype, const Dims& sizes) {
  return sizes.product() * static_cast<std::int64_t>(element_size(dtype));
}

// The two counters every kernel benchmark reports, per second of real time (the benchmarks run
// with UseRealTime: the pool's threads work while the caller waits): bytes/s counts the bytes a
// call reads plus writes, elements/s the output elements it writes.
inline void set_rates(benchmark::State& state, double bytes_per_call, double elements_per_call) {
  const double calls = static_cast<double>(state.iterations());
  state.counters["bytes/s"] = benchmark::Counter(bytes_per_call * calls, benchmark::Counter::kIsRate,
                                                 benchmark::Counter::kIs1024);
  state.counters["elements/s"] = benchmark::Counter(elements_per_call * calls, benchmark::Counter::kIsRate);
}

// Args: {bytes, threads}. The ceiling: memcpy of `bytes` in 256 KiB pieces over the same thread
// pool. bytes/s counts the read and the write (2 x bytes).
inline void time_memcpy(benchmark::State& state) {
  const std::int64_t bytes = state.range(0);
  set_num_threads(static_cast<int>(state.range(1)));
  Buffer src(static_cast<std::size_t>(bytes)), dst(static_cast<std::size_t>(bytes));
  constexpr std::int64_t kPiece = 256 * 1024;
  const std::int64_t pieces = (bytes + kPiece - 1) / kPiece;
  const auto copy = [&](std::int64_t b, std::int64_t e) {
    const std::int64_t lo = b * kPiece, hi = std::min(bytes, e * kPiece);
    std::memcpy(dst.data() + lo, src.data() + lo, static_cast<std::size_t>(hi - lo));
  };
  parallel_for(0, pieces, 1, copy);
  for (auto _ : state) {
    parallel_for(0, pieces, 1, copy);
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = benchmark::Counter(2.0 * static_cast<double>(bytes) * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
}

}  // namespace dmlops::bench
