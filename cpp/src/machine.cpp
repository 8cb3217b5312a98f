#include "dmlops/machine.hpp"

#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/error.hpp"

namespace dmlops {
namespace {

// Enough independent chains to cover the FMA latency on both pipes (4-5 cycles x 2 units)
// while staying in the 16 architectural vector registers of AVX2.
constexpr int kChains = 12;
// Iterations between two clock reads: long enough that the clock costs nothing.
constexpr std::int64_t kBatch = 1 << 16;

// acc = acc * m + a converges to a / (1 - m): no overflow, no denormals, however long it runs.
// Each function returns the FLOPs it did in one batch and stores a sum the compiler cannot drop.
__attribute__((target("avx512f"))) double batch_avx512(float m, float a, volatile float* sink) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512 mv = _mm512_set1_ps(m), av = _mm512_set1_ps(a);
  for (std::int64_t i = 0; i < kBatch; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], mv, av);
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  alignas(64) float lanes[16];  // not _mm512_reduce_add_ps: GCC 12's header warns inside it
  _mm512_store_ps(lanes, sum);
  float total = 0;
  for (float v : lanes) total += v;
  *sink = total;
  return 2.0 * 16 * kChains * kBatch;
}

__attribute__((target("avx2,fma"))) double batch_avx2(float m, float a, volatile float* sink) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  const __m256 mv = _mm256_set1_ps(m), av = _mm256_set1_ps(a);
  for (std::int64_t i = 0; i < kBatch; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], mv, av);
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float total = 0;
  for (float v : lanes) total += v;
  *sink = total;
  return 2.0 * 8 * kChains * kBatch;
}

double batch_sse2(float m, float a, volatile float* sink) {
  __m128 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm_set1_ps(static_cast<float>(c));
  const __m128 mv = _mm_set1_ps(m), av = _mm_set1_ps(a);
  for (std::int64_t i = 0; i < kBatch; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm_add_ps(_mm_mul_ps(acc[c], mv), av);
  __m128 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm_add_ps(sum, acc[c]);
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, sum);
  *sink = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  return 2.0 * 4 * kChains * kBatch;
}

using Batch = double (*)(float, float, volatile float*);

Batch chosen_batch() {
  if (avx512_enabled()) return batch_avx512;
  if (avx2_fma_enabled()) return batch_avx2;
  return batch_sse2;
}

// FLOPs one thread does in about `seconds` (at least one batch).
double thread_flops(Batch batch, double seconds, float m, float a) {
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

const char* fma_isa() {
  if (avx512_enabled()) return "avx512f";
  if (avx2_fma_enabled()) return "avx2+fma";
  return "sse2";
}

double fma_peak_gflops(int threads, double milliseconds) {
  if (threads < 1) fail("fma_peak_gflops: threads is ", threads, "; it must be >= 1");
  if (!(milliseconds > 0)) fail("fma_peak_gflops: milliseconds is ", milliseconds, "; it must be > 0");
  const Batch batch = chosen_batch();
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
    workers.emplace_back([&, t] { flops[t] = thread_flops(batch, seconds, m, a); });
  flops[0] = thread_flops(batch, seconds, m, a);
  for (std::thread& w : workers) w.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double total = 0;
  for (double f : flops) total += f;
  return total / wall / 1e9;
}

}  // namespace dmlops
