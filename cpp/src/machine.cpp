#include "dmlops/machine.hpp"

#include <chrono>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/platform.hpp"
#include "dmlops/core/simd.hpp"

namespace dmlops {
namespace {

// Iterations between two clock reads: long enough that the clock costs nothing.
constexpr std::int64_t kBatch = 1 << 16;

// One batch of FMA chains in Isa's registers, written once for every ISA (SimdKernel picks the
// variant the convolution kernels use). acc = acc * m + a converges to a / (1 - m): no overflow,
// no denormals, however long it runs. Returns the FLOPs done and stores a sum the compiler
// cannot drop.
template <class Isa>
struct FmaBatch {
  // Enough independent chains to cover the FMA latency on both pipes (4-5 cycles x 2 units)
  // while staying in the 16 architectural vector registers; the portable vector is two SSE
  // registers, so half as many of it.
  static constexpr int kChains = std::is_same_v<Isa, SimdPortable<float>> ? 6 : 12;

  static double run(float m, float a, volatile float* sink) {
    constexpr std::int64_t L = Isa::kLanes;
    alignas(64) float lanes[3 * L];  // m, a, then room for the chains' start values
    for (std::int64_t l = 0; l < L; ++l) lanes[l] = m, lanes[L + l] = a;
    const typename Isa::V mv = Isa::load(lanes), av = Isa::load(lanes + L);
    typename Isa::V acc[kChains];
    for (int c = 0; c < kChains; ++c) {
      for (std::int64_t l = 0; l < L; ++l) lanes[2 * L + l] = static_cast<float>(c);
      acc[c] = Isa::load(lanes + 2 * L);
    }
    for (std::int64_t i = 0; i < kBatch; ++i)
      for (int c = 0; c < kChains; ++c) acc[c] = Isa::madd(acc[c], mv, av);
    typename Isa::V sum = acc[0];
    for (int c = 1; c < kChains; ++c) sum = Isa::add(sum, acc[c]);
    Isa::store(lanes, sum);
    float total = 0;
    for (float v : lanes) total += v;
    *sink = total;
    return 2.0 * L * kChains * kBatch;
  }
};

double batch(float m, float a, volatile float* sink) { return SimdKernel<FmaBatch, float>::run(m, a, sink); }

// FLOPs one thread does in about `seconds` (at least one batch).
double thread_flops(double seconds, float m, float a) {
  using Clock = std::chrono::steady_clock;
  volatile float sink = 0;
  const auto start = Clock::now();
  double flops = 0;
  do {
    flops += batch(m, a, &sink);
  } while (std::chrono::duration<double>(Clock::now() - start).count() < seconds);
  return flops;
}

}  // namespace

double fma_peak_gflops(int threads, double milliseconds) {
  if (threads < 1) fail("fma_peak_gflops: threads is ", threads, "; it must be >= 1");
  if (!(milliseconds > 0)) fail("fma_peak_gflops: milliseconds is ", milliseconds, "; it must be > 0");
  const double seconds = milliseconds * 1e-3;
  // Opaque operands: the loop cannot be folded at compile time.
  const float m = 1.0f - 1.0f / static_cast<float>(1024 + threads), a = 1.0f / static_cast<float>(3 + threads);
  // All threads' FLOPs over the wall time from the first start to the last finish: threads that
  // take turns on a busy CPU add up to that CPU's rate, not to one CPU's rate each.
  std::vector<double> flops(static_cast<std::size_t>(threads));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  workers.reserve(flops.size() - 1);
  for (std::size_t t = 1; t < flops.size(); ++t)
    workers.emplace_back([&, t] { flops[t] = thread_flops(seconds, m, a); });
  flops[0] = thread_flops(seconds, m, a);
  for (std::thread& w : workers) w.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double total = 0;
  for (double f : flops) total += f;
  return total / wall / 1e9;
}

}  // namespace dmlops
