#include "common.hpp"

#if DMLOPS_X86
#include <immintrin.h>
#endif

namespace dmlops::conv {

#if DMLOPS_X86
DMLOPS_TARGET("avx2") void split_pairs_avx2(const float* src, std::int64_t pairs, float* even, float* odd) {
  std::int64_t i = 0;
  for (; i + 8 <= pairs; i += 8) {
    const __m256 a = _mm256_loadu_ps(src + 2 * i), b = _mm256_loadu_ps(src + 2 * i + 8);
    // [a0 a2 b0 b2 | a4 a6 b4 b6] -> [a0 a2 a4 a6 b0 b2 b4 b6], likewise for the odd entries.
    const __m256d e = _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
    const __m256d o = _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm256_storeu_ps(even + i, _mm256_castpd_ps(_mm256_permute4x64_pd(e, _MM_SHUFFLE(3, 1, 2, 0))));
    _mm256_storeu_ps(odd + i, _mm256_castpd_ps(_mm256_permute4x64_pd(o, _MM_SHUFFLE(3, 1, 2, 0))));
  }
  for (; i < pairs; ++i) even[i] = src[2 * i], odd[i] = src[2 * i + 1];
}
#endif

std::int64_t balanced_count(std::int64_t per_block, std::int64_t blocks, std::int64_t threads, bool fewer) {
  if (threads == 1) return blocks;
  const std::int64_t chunks = kParallelChunksPerThread * threads;
  const auto even = [&](std::int64_t count) {
    const std::int64_t tasks = per_block * count;
    return tasks % threads == 0 && (tasks <= chunks || tasks % chunks == 0);
  };
  for (std::int64_t count = blocks; count >= (fewer ? std::max<std::int64_t>(1, blocks / 2) : blocks); --count) {
    if (even(count)) return count;
  }
  for (std::int64_t count = blocks + 1; count <= 2 * blocks; ++count) {
    if (even(count)) return count;
  }
  return blocks;
}

}  // namespace dmlops::conv
