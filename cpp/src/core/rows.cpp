#include "dmlops/core/rows.hpp"

#include <algorithm>

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/dispatch.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/core/platform.hpp"

#if DMLOPS_X86
#include <immintrin.h>
#endif

namespace dmlops {
namespace {

constexpr std::size_t kCacheLineBytes = 64;
constexpr std::size_t kStreamMinBytes = 4096;

// Rows at least this long go to memcpy, whose non-temporal path beats ordinary stores once a
// copy is far beyond the cache; a row never is in practice (column blocks are 64 KiB).
constexpr std::size_t kInlineCopyLimit = std::size_t{1} << 20;

// Up to 64 bytes with two possibly overlapping moves of the largest width that fits.
template <std::size_t kWidth>
DMLOPS_ALWAYS_INLINE inline void copy_two(std::byte* dst, const std::byte* src, std::size_t n) {
  unsigned char head[kWidth], tail[kWidth];
  std::memcpy(head, src, kWidth);
  std::memcpy(tail, src + n - kWidth, kWidth);
  std::memcpy(dst, head, kWidth);
  std::memcpy(dst + n - kWidth, tail, kWidth);
}

DMLOPS_ALWAYS_INLINE inline void copy_short(std::byte* dst, const std::byte* src, std::size_t n) {
  if (n >= 32) return copy_two<32>(dst, src, n);
  if (n >= 16) return copy_two<16>(dst, src, n);
  if (n >= 8) return copy_two<8>(dst, src, n);
  if (n >= 4) return copy_two<4>(dst, src, n);
  if (n >= 2) return copy_two<2>(dst, src, n);
  if (n == 1) *dst = *src;
}

#if DMLOPS_X86
// 32-byte vectors with aligned stores: one unaligned head vector, whole aligned vectors four at
// a time, one unaligned tail vector overlapping the last aligned one. n >= 64.
DMLOPS_ALWAYS_INLINE DMLOPS_TARGET("avx2") inline void copy_long_avx2(std::byte* dst, const std::byte* src, std::size_t n) {
  const __m256i head = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
  const __m256i tail = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + n - 32));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), head);
  std::size_t i = 32 - (reinterpret_cast<std::uintptr_t>(dst) & 31);
  for (; i + 128 <= n - 32; i += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 64));
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 96));
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst + i), a);
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst + i + 32), b);
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst + i + 64), c);
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst + i + 96), d);
  }
  for (; i < n - 32; i += 32)
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + n - 32), tail);
}

// The AVX2 variant whole: short copies inline, long ones with vectors, huge ones to memcpy.
DMLOPS_ALWAYS_INLINE DMLOPS_TARGET("avx2") inline void copy_bytes_avx2(std::byte* dst, const std::byte* src, std::size_t n) {
  if (n <= 64) return copy_short(dst, src, n);
  if (n < kInlineCopyLimit) return copy_long_avx2(dst, src, n);
  std::memcpy(dst, src, n);
}

DMLOPS_TARGET("avx2") void copy_byte_rows_avx2(std::byte* dst, std::int64_t dst_row_step, const std::byte* src,
                                              std::int64_t src_row_step, std::size_t n, std::int64_t rows) {
  if (n > 64 && n <= 128) {
    // Four possibly overlapping vectors a row, the same for every row: no alignment head and no
    // loop per row.
    for (std::int64_t r = 0; r < rows; ++r, dst += dst_row_step, src += src_row_step) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32));
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + n - 64));
      const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + n - 32));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), a);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32), b);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + n - 64), c);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + n - 32), d);
    }
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r, dst += dst_row_step, src += src_row_step) copy_bytes_avx2(dst, src, n);
}
#endif

// The copies of copy_framed_rows: AVX2's inline (no call per row), the C library's otherwise.
#if DMLOPS_X86
struct InlineCopyAvx2 {
  DMLOPS_TARGET("avx2") static void run(std::byte* dst, const std::byte* src, std::size_t n) { copy_bytes_avx2(dst, src, n); }
};
#endif
struct LibcCopy {
  static void run(std::byte* dst, const std::byte* src, std::size_t n) { std::memcpy(dst, src, n); }
};

// copy_framed_rows' loop. With kHeads >= 0 the frame has kHeads elements before the copy and
// kTails after it, their inputs held in locals; with -1, as many as the frame says, read from it
// per row. kStrided: row r's input at in + r * in_step, else at in + in_offsets[r]. (The few
// values the loop needs fit the registers: with a few more, GCC spilled some and reloaded them
// per row.)
template <class T, class Copy, int kHeads, int kTails, bool kStrided>
DMLOPS_ALWAYS_INLINE inline void framed_rows(std::byte* out, std::int64_t out_step, const std::byte* in,
                                             const std::int64_t* in_offsets, std::int64_t in_step, std::int64_t rows,
                                             const FramedRows& frame, T fill) {
  constexpr bool kFixed = kHeads >= 0;
  constexpr auto size = static_cast<std::int64_t>(sizeof(T));
  constexpr int kSlots = kFixed ? std::max(kHeads + kTails, 1) : kMaxFramedElements;
  // Elements are read relative to the copy's source (one pointer a row).
  std::int64_t fixed_in[kSlots], any_in[kMaxFramedElements];
  std::int64_t* const element_in = kFixed ? fixed_in : any_in;
  const int heads = kFixed ? kHeads : frame.heads, elements = kFixed ? kHeads + kTails : frame.heads + frame.tails;
  for (int i = 0; i < elements; ++i) {
    const std::int64_t at = frame.element_in[i];
    element_in[i] = at == kFramedFill ? at : at - frame.copy_in;
  }
  const auto put = [fill](std::byte* dst, const std::byte* src, std::int64_t in_at) {
    const T value = in_at == kFramedFill ? fill : load<T>(src + in_at);
    std::memcpy(dst, &value, sizeof(T));
  };
  const std::int64_t bytes = frame.copy_bytes;
  in += frame.copy_in;
  const std::int64_t* const offsets_end = kStrided ? nullptr : in_offsets + rows;
  for (std::int64_t left = rows; kStrided ? left > 0 : in_offsets != offsets_end; --left, out += out_step) {
    const std::byte* src = kStrided ? in : in + *in_offsets;
    if constexpr (kStrided) in += in_step;
    else ++in_offsets;
    for (int i = 0; i < heads; ++i) put(out + i * size, src, element_in[i]);
    std::byte* after = out + heads * size;
    Copy::run(after, src, static_cast<std::size_t>(bytes));
    after += bytes;
    for (int i = heads; i < elements; ++i) put(after + (i - heads) * size, src, element_in[i]);
  }
}

// The frames of pads by one and by two elements each side get loops of their own (their
// elements in registers); others read theirs per row.
template <class T, class Copy, bool kStrided>
DMLOPS_ALWAYS_INLINE inline void framed_rows_of(std::byte* out, std::int64_t out_step, const std::byte* in,
                                                const std::int64_t* in_offsets, std::int64_t in_step, std::int64_t rows,
                                                const FramedRows& frame, T fill) {
  if (frame.heads == 1 && frame.tails == 1)
    return framed_rows<T, Copy, 1, 1, kStrided>(out, out_step, in, in_offsets, in_step, rows, frame, fill);
  if (frame.heads == 2 && frame.tails == 2)
    return framed_rows<T, Copy, 2, 2, kStrided>(out, out_step, in, in_offsets, in_step, rows, frame, fill);
  framed_rows<T, Copy, -1, -1, kStrided>(out, out_step, in, in_offsets, in_step, rows, frame, fill);
}

template <class T, class Copy>
DMLOPS_ALWAYS_INLINE inline void framed_rows_with(std::byte* out, std::int64_t out_step, const std::byte* in,
                                                  const std::int64_t* in_offsets, std::int64_t in_step, std::int64_t rows,
                                                  const FramedRows& frame, T fill) {
  if (in_offsets == nullptr) return framed_rows_of<T, Copy, true>(out, out_step, in, nullptr, in_step, rows, frame, fill);
  framed_rows_of<T, Copy, false>(out, out_step, in, in_offsets, 0, rows, frame, fill);
}

template <class T>
DMLOPS_NOINLINE void framed_rows_baseline(std::byte* out, std::int64_t out_step, const std::byte* in,
                                         const std::int64_t* in_offsets, std::int64_t in_step, std::int64_t rows,
                                         const FramedRows& frame, T fill) {
  framed_rows_with<T, LibcCopy>(out, out_step, in, in_offsets, in_step, rows, frame, fill);
}
#if DMLOPS_X86
// (Flattened: the copy inlined too, so that the loop's state stays in registers.)
template <class T>
DMLOPS_FLATTEN DMLOPS_TARGET("avx2")
void framed_rows_avx2(std::byte* out, std::int64_t out_step, const std::byte* in, const std::int64_t* in_offsets,
                      std::int64_t in_step, std::int64_t rows, const FramedRows& frame, T fill) {
  framed_rows_with<T, InlineCopyAvx2>(out, out_step, in, in_offsets, in_step, rows, frame, fill);
}
#endif

void copy_byte_rows_baseline(std::byte* dst, std::int64_t dst_row_step, const std::byte* src, std::int64_t src_row_step,
                             std::size_t n, std::int64_t rows) {
  for (std::int64_t r = 0; r < rows; ++r, dst += dst_row_step, src += src_row_step) std::memcpy(dst, src, n);
}

void copy_bytes_baseline(std::byte* dst, const std::byte* src, std::size_t n) { std::memcpy(dst, src, n); }

}  // namespace

std::int64_t streaming_cache_bytes(const platform::CacheSizes& caches) {
  return caches.l3 > 64 * caches.l2 ? 32 * caches.l2 : caches.l3;
}
std::int64_t streaming_cache_bytes() { return streaming_cache_bytes(platform::cache_sizes()); }

std::int64_t staged_cache_bytes(const platform::CacheSizes& caches, bool zen4, int threads) {
  const std::int64_t cache = streaming_cache_bytes(caches);
  return zen4 && threads == 1 ? cache / 8 * 3 : cache / 4 * 3;
}
std::int64_t staged_cache_bytes() {
  return staged_cache_bytes(platform::cache_sizes(), platform::cpu_features().zen4, num_threads());
}

bool stream_output(std::int64_t output_bytes) {
#if DMLOPS_X86
  return output_bytes > streaming_cache_bytes();
#else
  (void)output_bytes;  // Arm's stores already avoid reading lines they overwrite whole
  return false;
#endif
}

bool stream_staged(std::int64_t input_bytes, std::int64_t output_bytes) {
#if DMLOPS_X86
  return output_bytes >= 2 * input_bytes && input_bytes + output_bytes > staged_cache_bytes();
#else
  (void)input_bytes, (void)output_bytes;
  return false;
#endif
}

#if DMLOPS_X86
namespace {
// Whole lines, from anywhere to a line-aligned address, past the caches, in the widest stores
// the CPU has. A streaming store holds its store-buffer entry until a write-combining buffer
// takes it, so while memory drains a streamed batch the kernel's next ordinary stores queue
// behind it; a line in one entry instead of four (SSE2) lets the next batch's gathering go on.
// Zen 4, 1 thread: the nearest x1.75 resampling of 1x64x128x128 (12.85 MB out, its rows staged
// 16 KiB at a time) took 0.89-0.92x the time with 64-byte stores (a C++ loop of the same: 0.93x
// with 32- or 64-byte ones); a plain streamed copy, bound by memory, gained nothing.
DMLOPS_TARGET("avx512f") void stream_lines_avx512(std::byte* dst, const std::byte* src, std::size_t lines) {
  for (std::size_t i = 0; i < lines; ++i, dst += kCacheLineBytes, src += kCacheLineBytes)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst), _mm512_loadu_si512(src));
}
DMLOPS_TARGET("avx2") void stream_lines_avx2(std::byte* dst, const std::byte* src, std::size_t lines) {
  for (std::size_t i = 0; i < lines; ++i, dst += kCacheLineBytes, src += kCacheLineBytes) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + 32), b);
  }
}
void stream_lines_sse2(std::byte* dst, const std::byte* src, std::size_t lines) {
  for (std::size_t i = 0; i < lines; ++i, dst += kCacheLineBytes, src += kCacheLineBytes) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 48), d);
  }
}
void stream_lines(std::byte* dst, const std::byte* src, std::size_t lines) {
  using Fn = void (*)(std::byte*, const std::byte*, std::size_t);
  static const Fn chosen = avx512_enabled() ? stream_lines_avx512 : avx2_enabled() ? stream_lines_avx2 : stream_lines_sse2;
  chosen(dst, src, lines);
}
}  // namespace
#endif

void stream_bytes(std::byte* dst, const std::byte* src, std::size_t n) {
#if DMLOPS_X86
  // Runs of kStreamMinBytes or more, and of those only the whole cache lines: streaming each
  // byte of the 1 KiB runs of a 288 MB reflection pad (rows shared with the padding's ordinary
  // stores) made it 4.5x slower than with ordinary stores on Zen 4; with whole lines only, still
  // 1.6x. Runs of 4 KiB gained 6%, of 16 KiB 27%, and a 1-D pad's one 80 MB run 27-37%.
  if (n >= kStreamMinBytes) {
    const std::size_t head = (kCacheLineBytes - (reinterpret_cast<std::uintptr_t>(dst) & (kCacheLineBytes - 1))) & (kCacheLineBytes - 1);
    copy_bytes(dst, src, head);
    const std::size_t lines = (n - head) / kCacheLineBytes, end = head + lines * kCacheLineBytes;
    stream_lines(dst + head, src + head, lines);
    copy_bytes(dst + end, src + end, n - end);
    return;
  }
#endif
  copy_bytes(dst, src, n);
}

void stream_fence() {
#if DMLOPS_X86
  _mm_sfence();
#endif
}


void LineStreamer::write(std::byte* dst, const std::byte* src, std::size_t n) {
#if DMLOPS_X86
  if (n == 0) return;
  if (waiting_ > 0 && dst != line_ + waiting_) finish();
  if (waiting_ == 0) {
    // A new stretch: the part of its first line before dst is not ours; that line's own part
    // goes out with ordinary stores.
    const std::size_t head = reinterpret_cast<std::uintptr_t>(dst) & (kLine - 1);
    if (head > 0) {
      const std::size_t part = std::min(n, kLine - head);
      copy_bytes(dst, src, part);
      dst += part, src += part, n -= part;
    }
  } else {  // complete the waiting line
    const std::size_t part = std::min(n, kLine - waiting_);
    std::memcpy(pending_ + waiting_, src, part);
    waiting_ += part, dst += part, src += part, n -= part;
    if (waiting_ < kLine) return;
    stream_lines(line_, pending_, 1);
    waiting_ = 0, streamed_ = true;
  }
  if (const std::size_t lines = n / kLine; lines > 0) {
    stream_lines(dst, src, lines);
    dst += lines * kLine, src += lines * kLine, n -= lines * kLine, streamed_ = true;
  }
  if (n > 0) {
    std::memcpy(pending_, src, n);
    line_ = dst, waiting_ = n;
  }
#else
  copy_bytes(dst, src, n);
#endif
}

void LineStreamer::finish() {
  if (waiting_ > 0) copy_bytes(line_, pending_, waiting_);
  waiting_ = 0;
  if (streamed_) stream_fence();
  streamed_ = false;
}

namespace {
#if DMLOPS_X86
// The low `bytes` bits (bytes <= 64): the lanes [0, bytes) of a byte mask.
std::uint64_t byte_mask(std::int64_t bytes) { return bytes >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bytes) - 1; }

// LineAssembler's work with AVX-512BW: `carry` holds the line being assembled in a register for
// the length of a call. Lanes below `waiting` are taken; a piece's bytes go to the lanes at and
// above it, loaded from `src - waiting` with the lanes below masked off (a masked-off lane is
// never read, so the load does not touch memory before the piece).
class AssemblerAvx512 {
 public:
  DMLOPS_TARGET("avx512f,avx512bw") explicit AssemblerAvx512(LineAssembler::State& state)
      : state_(state), line_(state.line), head_(state.head), waiting_(state.waiting),
        carry_(_mm512_load_si512(state.carry)) {}
  DMLOPS_TARGET("avx512f,avx512bw") ~AssemblerAvx512() {
    state_.line = line_, state_.head = head_, state_.waiting = waiting_;
    _mm512_store_si512(state_.carry, carry_);
  }
  DMLOPS_ALWAYS_INLINE DMLOPS_TARGET("avx512f,avx512bw") void copy(const std::byte* src, std::int64_t n) {
    append(n, Bytes{src});
  }
  DMLOPS_ALWAYS_INLINE DMLOPS_TARGET("avx512f,avx512bw") void zeros(std::int64_t n) { append(n, Zeros{}); }
  DMLOPS_TARGET("avx512f,avx512bw") void finish() {
    _mm512_mask_storeu_epi8(line_, byte_mask(waiting_) & ~byte_mask(head_), carry_);
    head_ = waiting_;  // written: not to be written again
  }

 private:
  // The pieces append() takes (function objects: a lambda would not take the target ISA).
  struct Bytes {
    const std::byte* src;
    DMLOPS_ALWAYS_INLINE DMLOPS_TARGET("avx512f,avx512bw") __m512i operator()(std::uint64_t lanes, std::int64_t at) const {
      return _mm512_maskz_loadu_epi8(lanes, src + at);
    }
  };
  struct Zeros {
    DMLOPS_ALWAYS_INLINE DMLOPS_TARGET("avx512f,avx512bw") __m512i operator()(std::uint64_t, std::int64_t) const {
      return _mm512_setzero_si512();
    }
  };
  // n bytes of a piece: piece(lanes, at) holds its bytes [at, at + 64) in the given lanes (at
  // may be negative: lanes below -at are never asked for).
  template <class Piece>
  DMLOPS_ALWAYS_INLINE DMLOPS_TARGET("avx512f,avx512bw") void append(std::int64_t n, Piece piece) {
    const std::uint64_t taken = byte_mask(waiting_);
    if (waiting_ + n < 64) {
      carry_ = _mm512_mask_blend_epi8(taken, piece(byte_mask(waiting_ + n) & ~taken, -waiting_), carry_);
      waiting_ += n;
      return;
    }
    put(_mm512_mask_blend_epi8(taken, piece(~taken, -waiting_), carry_));
    std::int64_t at = 64 - waiting_;
    for (; at + 64 <= n; at += 64, line_ += 64) _mm512_stream_si512(reinterpret_cast<__m512i*>(line_), piece(~std::uint64_t{0}, at));
    waiting_ = n - at;
    carry_ = piece(byte_mask(waiting_), at);
  }
  // A whole line: streamed, or stored masked where the stretch starts inside it.
  DMLOPS_ALWAYS_INLINE DMLOPS_TARGET("avx512f,avx512bw") void put(__m512i line) {
    if (head_ == 0) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(line_), line);
    } else {
      _mm512_mask_storeu_epi8(line_, ~byte_mask(head_), line);
      head_ = 0;
    }
    line_ += 64;
  }

  LineAssembler::State& state_;
  std::byte* line_;
  std::int64_t head_, waiting_;
  __m512i carry_;
};

DMLOPS_TARGET("avx512f,avx512bw")
void assemble_rows_avx512(LineAssembler::State& state, const std::byte* src, std::int64_t src_step, std::size_t n,
                          std::int64_t rows, std::size_t gap) {
  AssemblerAvx512 a(state);
  const auto length = static_cast<std::int64_t>(n), zeros = static_cast<std::int64_t>(gap);
  for (std::int64_t r = 0; r < rows; ++r, src += src_step) {
    if (r > 0 && zeros > 0) a.zeros(zeros);
    a.copy(src, length);
  }
}
DMLOPS_TARGET("avx512f,avx512bw") void assemble_zeros_avx512(LineAssembler::State& state, std::size_t n) {
  AssemblerAvx512(state).zeros(static_cast<std::int64_t>(n));
}
DMLOPS_TARGET("avx512f,avx512bw") void assemble_finish_avx512(LineAssembler::State& state) {
  AssemblerAvx512(state).finish();
}
#endif
}  // namespace

bool LineAssembler::available() {
#if DMLOPS_X86
  return avx512bw_enabled();
#else
  return false;
#endif
}

LineAssembler::LineAssembler(std::byte* dst) : state_{} {
  const auto head = available() ? static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(dst) % 64) : 0;
  state_.line = dst - head, state_.head = head, state_.waiting = head;
}

// Without AVX-512BW `line` is where the next byte goes and nothing waits.
void LineAssembler::copy_rows(const std::byte* src, std::int64_t src_step, std::size_t n, std::int64_t rows,
                              std::size_t gap) {
#if DMLOPS_X86
  if (available()) return assemble_rows_avx512(state_, src, src_step, n, rows, gap);
#endif
  for (std::int64_t r = 0; r < rows; ++r, src += src_step) {
    if (r > 0 && gap > 0) std::memset(state_.line, 0, gap), state_.line += gap;
    copy_bytes(state_.line, src, n);
    state_.line += n;
  }
}

void LineAssembler::zeros(std::size_t n) {
#if DMLOPS_X86
  if (available()) return assemble_zeros_avx512(state_, n);
#endif
  std::memset(state_.line, 0, n);
  state_.line += n;
}

void LineAssembler::finish() {
#if DMLOPS_X86
  if (available() && state_.waiting > state_.head) assemble_finish_avx512(state_);
#endif
}

#if DMLOPS_X86
// dst[2j] += src[j] for j < n, eight sums per step (each source register spread over the even
// lanes of two); see add_row.
DMLOPS_TARGET("avx2") void add_to_even_avx2(const float* src, std::int64_t n, float* dst) {
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 s = _mm256_loadu_ps(src + j);
    // [s0 s0 s1 s1 | s4 s4 s5 s5] and [s2 s2 s3 s3 | s6 s6 s7 s7] -> s0..s3 and s4..s7, each doubled
    const __m256 lo = _mm256_unpacklo_ps(s, s), hi = _mm256_unpackhi_ps(s, s);
    const __m256 first = _mm256_permute2f128_ps(lo, hi, 0x20), second = _mm256_permute2f128_ps(lo, hi, 0x31);
    const __m256 d0 = _mm256_loadu_ps(dst + 2 * j), d1 = _mm256_loadu_ps(dst + 2 * j + 8);
    _mm256_storeu_ps(dst + 2 * j, _mm256_blend_ps(d0, _mm256_add_ps(d0, first), 0x55));
    _mm256_storeu_ps(dst + 2 * j + 8, _mm256_blend_ps(d1, _mm256_add_ps(d1, second), 0x55));
  }
  for (; j < n; ++j) dst[2 * j] += src[j];
}
#endif

#if DMLOPS_X86
namespace {

// The even (kOdd: odd) elements of the 64 bytes at p, as 32 bytes: narrowed within each 128-bit
// lane (pack, shuffle or unpack of the two halves), then the four quarters put back in order.
template <int kSize, bool kOdd>
DMLOPS_ALWAYS_INLINE DMLOPS_TARGET("avx2") inline __m256i alternate_elements(const std::byte* p) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32));
  __m256i lanes;
  if constexpr (kSize == 1) {
    const __m256i low = _mm256_set1_epi16(0x00ff);
    lanes = kOdd ? _mm256_packus_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8))
                 : _mm256_packus_epi16(_mm256_and_si256(a, low), _mm256_and_si256(b, low));
  } else if constexpr (kSize == 2) {
    const __m256i low = _mm256_set1_epi32(0xffff);
    lanes = kOdd ? _mm256_packus_epi32(_mm256_srli_epi32(a, 16), _mm256_srli_epi32(b, 16))
                 : _mm256_packus_epi32(_mm256_and_si256(a, low), _mm256_and_si256(b, low));
  } else if constexpr (kSize == 4) {
    lanes = _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), kOdd ? 0xdd : 0x88));
  } else {
    lanes = kOdd ? _mm256_unpackhi_epi64(a, b) : _mm256_unpacklo_epi64(a, b);
  }
  return _mm256_permute4x64_epi64(lanes, 0xd8);
}

template <int kSize>
DMLOPS_TARGET("avx2") void zeros_then_even_rows_avx2_sized(std::byte* dst, std::int64_t dst_row_step, std::int64_t zeros,
                                                          const std::byte* src, std::int64_t src_row_step, std::int64_t n,
                                                          std::int64_t rows) {
  constexpr std::int64_t V = 32 / kSize;  // output elements per vector
  if (n <= V) fail("zeros_then_even_rows_avx2: rows of ", n, " elements; more than ", V, " are needed");
  // The zeros first, a vector at a time (the last may reach into the elements: n > V keeps it
  // inside the row), then vectors of V elements, each from the 2V input elements from its first,
  // while those lie inside the row (its last element read, 2n - 2, may be the row's last byte),
  // then the row's last V elements as the odd ones of the 2V input elements before its last (it
  // rewrites elements the vector before wrote, with the same values). No masks, no element loop.
  const __m256i zero = _mm256_setzero_si256();
  const std::int64_t zero_bytes = zeros * kSize, tail = n - V;
  for (std::int64_t r = 0; r < rows; ++r, dst += dst_row_step, src += src_row_step) {
    // (The address opaque: GCC made this loop a memset call per row, with a vzeroupper; a
    // float16 3x3 stride-2 unfold of 1x64x112x112 took 1.13x the time so on Zen 3.)
    for (std::int64_t b = 0; b < zero_bytes; b += 32) {
      std::byte* at = dst + b;
      DMLOPS_OPAQUE(at);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), zero);
    }
    std::byte* out = dst + zero_bytes;
    for (std::int64_t j = 0; j < tail; j += V)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j * kSize), alternate_elements<kSize, false>(src + 2 * j * kSize));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + tail * kSize),
                        alternate_elements<kSize, true>(src + (2 * tail - 1) * kSize));
  }
}

}  // namespace

void zeros_then_even_rows_avx2(std::byte* dst, std::int64_t dst_row_step, std::int64_t zeros, const std::byte* src,
                               std::int64_t src_row_step, std::int64_t n, std::int64_t rows, int size) {
  visit_size(static_cast<std::size_t>(size), [&](auto tag) {
    constexpr int kSize = sizeof(typename decltype(tag)::type);
    zeros_then_even_rows_avx2_sized<kSize>(dst, dst_row_step, zeros, src, src_row_step, n, rows);
  });
}
#endif


#if DMLOPS_X86
namespace {

int size_index(int size) { return size == 1 ? 0 : size == 2 ? 1 : size == 4 ? 2 : 3; }

// The vpermb indices: for a repeat of k, output byte q of a block of 64k (from a block of 64
// input bytes) reads input byte q / size / k * size + q % size; for a stride-2 copy, output byte
// j of 64 reads byte j / size * 2 * size + j % size of 128.
struct ShuffleTables {
  alignas(64) std::uint8_t repeat[4][kMaxRepeatVbmi - 1][kMaxRepeatVbmi * 64];
  alignas(64) std::uint8_t even[4][64];
  ShuffleTables() {
    for (int s = 0; s < 4; ++s) {
      const int size = 1 << s;
      for (int k = 2; k <= kMaxRepeatVbmi; ++k) {
        for (int q = 0; q < 64 * k; ++q) repeat[s][k - 2][q] = static_cast<std::uint8_t>(q / size / k * size + q % size);
      }
      for (int j = 0; j < 64; ++j) even[s][j] = static_cast<std::uint8_t>(j / size * 2 * size + j % size);
    }
  }
};
const ShuffleTables& shuffle_tables() {
  static const ShuffleTables tables;
  return tables;
}

// Bits [from, to) (clamped to [0, 64)).
std::uint64_t byte_range_mask(std::int64_t from, std::int64_t to) {
  return byte_mask(std::clamp<std::int64_t>(to, 0, 64)) & ~byte_mask(std::clamp<std::int64_t>(from, 0, 64));
}

// One row: `bytes` input bytes at src, each element written K times at dst, with the permute
// indices of that repeat (shuffle_tables). Masked loads and stores in the last partial block
// touch no byte past either row.
template <int K>
DMLOPS_ALWAYS_INLINE DMLOPS_TARGET("avx512f,avx512bw,avx512vbmi") inline void repeat_row_vbmi(std::byte* dst, const std::byte* src,
                                                                                              std::int64_t bytes, const __m512i* index) {
  std::int64_t i = 0;
  for (; i + 64 <= bytes; i += 64, dst += 64 * K) {
    const __m512i v = _mm512_loadu_si512(src + i);
    // (The zero-masking form, every lane kept: GCC 12 warns on the plain form's undefined operand.)
    for (int m = 0; m < K; ++m) _mm512_storeu_si512(dst + 64 * m, _mm512_maskz_permutexvar_epi8(~__mmask64{0}, index[m], v));
  }
  if (i == bytes) return;
  const std::int64_t left = bytes - i;
  const __m512i v = _mm512_maskz_loadu_epi8(byte_mask(left), src + i);
  for (int m = 0; m < K && left * K > 64 * m; ++m)
    _mm512_mask_storeu_epi8(dst + 64 * m, byte_mask(left * K - 64 * m), _mm512_maskz_permutexvar_epi8(~__mmask64{0}, index[m], v));
}

template <int K>
DMLOPS_TARGET("avx512f,avx512bw,avx512vbmi") void repeat_vbmi(std::byte* dst, const std::byte* src, std::int64_t bytes,
                                                                const std::uint8_t* table) {
  __m512i index[K];
  for (int m = 0; m < K; ++m) index[m] = _mm512_load_si512(table + 64 * m);
  repeat_row_vbmi<K>(dst, src, bytes, index);
}

template <int K>
DMLOPS_TARGET("avx512f,avx512bw,avx512vbmi")
void repeat_rows_vbmi_k(std::byte* const* outs, const std::byte* const* ins, int count, std::int64_t bytes,
                        const std::uint8_t* table, std::int64_t copies, std::int64_t copy_stride) {
  __m512i index[K];
  for (int m = 0; m < K; ++m) index[m] = _mm512_load_si512(table + 64 * m);
  for (int r = 0; r < count; ++r) repeat_row_vbmi<K>(outs[r], ins[r], bytes, index);
  // Then the copies, from the rows just written (in L1), once every row of the batch is, as the
  // row batches copy them. (Each permute stored to both rows at once, 1x64x128x128 float32
  // upsampled 2x2 took 1.3-2.7x the time on the 16-core Xeon; with either order of the copies it
  // still took 1.06-1.3x at 8 and 16 threads there, hence Plan::repeat_rows' bound on the row.)
  for (int r = 0; r < count; ++r) {
    for (std::int64_t j = 1; j < copies; ++j) copy_bytes_avx2(outs[r] + j * copy_stride, outs[r], static_cast<std::size_t>(K * bytes));
  }
}

// The masks of a block of zeros_then_even_rows_vbmi: the bytes it loads of each 64-byte half of its
// input, and those it stores.
struct EvenBlockMasks {
  __mmask64 a, b, store;
};

// One block: 64 output bytes at dst from the 128 input bytes at src.
DMLOPS_TARGET("avx512f,avx512bw,avx512vbmi")
inline void even_block(std::byte* dst, const std::byte* src, __m512i index, const EvenBlockMasks& m) {
  const __m512i a = _mm512_maskz_loadu_epi8(m.a, src), b = _mm512_maskz_loadu_epi8(m.b, src + 64);
  _mm512_mask_storeu_epi8(dst, m.store, _mm512_permutex2var_epi8(a, index, b));
}

// The whole blocks of a stride-2 row whose output bytes [o0, o1) (steps of 64) read 128 input
// bytes each inside the row: plain loads and stores.
DMLOPS_TARGET("avx512f,avx512bw,avx512vbmi")
inline void even_whole_blocks(std::byte* dst, const std::byte* src, __m512i index, std::int64_t o0, std::int64_t o1) {
  for (std::int64_t o = o0; o < o1; o += 64) {
    const __m512i a = _mm512_loadu_si512(src + 2 * o), b = _mm512_loadu_si512(src + 2 * o + 64);
    _mm512_storeu_si512(dst + o, _mm512_permutex2var_epi8(a, index, b));
  }
}

}  // namespace

void repeat_elements_vbmi(std::byte* dst, const std::byte* src, std::int64_t n, int size, int k) {
  const std::uint8_t* table = shuffle_tables().repeat[size_index(size)][k - 2];
  const std::int64_t bytes = n * size;
  switch (k) {
    case 2: return repeat_vbmi<2>(dst, src, bytes, table);
    case 3: return repeat_vbmi<3>(dst, src, bytes, table);
    case 4: return repeat_vbmi<4>(dst, src, bytes, table);
    case 5: return repeat_vbmi<5>(dst, src, bytes, table);
    case 6: return repeat_vbmi<6>(dst, src, bytes, table);
    case 7: return repeat_vbmi<7>(dst, src, bytes, table);
    case 8: return repeat_vbmi<8>(dst, src, bytes, table);
  }
  fail("repeat_elements_vbmi: k is ", k, "; it must be from 2 to ", kMaxRepeatVbmi);
}

void repeat_rows_vbmi(std::byte* const* outs, const std::byte* const* ins, int count, std::int64_t n, int size, int k,
                      std::int64_t copies, std::int64_t copy_stride) {
  const std::uint8_t* table = shuffle_tables().repeat[size_index(size)][k - 2];
  const std::int64_t bytes = n * size;
  switch (k) {
    case 2: return repeat_rows_vbmi_k<2>(outs, ins, count, bytes, table, copies, copy_stride);
    case 3: return repeat_rows_vbmi_k<3>(outs, ins, count, bytes, table, copies, copy_stride);
    case 4: return repeat_rows_vbmi_k<4>(outs, ins, count, bytes, table, copies, copy_stride);
    case 5: return repeat_rows_vbmi_k<5>(outs, ins, count, bytes, table, copies, copy_stride);
    case 6: return repeat_rows_vbmi_k<6>(outs, ins, count, bytes, table, copies, copy_stride);
    case 7: return repeat_rows_vbmi_k<7>(outs, ins, count, bytes, table, copies, copy_stride);
    case 8: return repeat_rows_vbmi_k<8>(outs, ins, count, bytes, table, copies, copy_stride);
  }
  fail("repeat_rows_vbmi: k is ", k, "; it must be from 2 to ", kMaxRepeatVbmi);
}

DMLOPS_TARGET("avx512f,avx512bw,avx512vbmi")
void copy_even_rows_vbmi(std::byte* dst, std::int64_t dst_row_step, const std::byte* src, std::int64_t src_row_step,
                         std::int64_t n, std::int64_t rows, int size) {
  if (n <= 0) return;
  const __m512i index = _mm512_load_si512(shuffle_tables().even[size_index(size)]);
  // The input ends with the last element read: its odd neighbour may lie past the row. The
  // masks are the same for every row: made once (made per row, they cost a float16 stride-2
  // unfold of 56-element rows 8% of its time).
  const std::int64_t out_bytes = n * size, in_bytes = (2 * n - 1) * size;
  if (out_bytes < 64) {
    const __mmask64 in_a = byte_mask(in_bytes), in_b = in_bytes > 64 ? byte_mask(in_bytes - 64) : 0, out = byte_mask(out_bytes);
    for (std::int64_t r = 0; r < rows; ++r, dst += dst_row_step, src += src_row_step) {
      const __m512i a = _mm512_maskz_loadu_epi8(in_a, src), b = _mm512_maskz_loadu_epi8(in_b, src + 64);
      _mm512_mask_storeu_epi8(dst, out, _mm512_permutex2var_epi8(a, index, b));
    }
    return;
  }
  // Whole blocks of 64 output bytes, then the row's last 64 bytes as one more block (it rewrites
  // bytes the block before wrote, with the same values): no masked store. Every whole block
  // but the last reads 128 input bytes inside the row (its offset is a multiple of the element
  // size below `last`); the last one's second half ends at the row's last element.
  const std::int64_t last = out_bytes - 64;
  const __mmask64 last_b = byte_mask(in_bytes - 2 * last - 64);
  for (std::int64_t r = 0; r < rows; ++r, dst += dst_row_step, src += src_row_step) {
    even_whole_blocks(dst, src, index, 0, last);
    const __m512i a = _mm512_loadu_si512(src + 2 * last), b = _mm512_maskz_loadu_epi8(last_b, src + 2 * last + 64);
    _mm512_storeu_si512(dst + last, _mm512_permutex2var_epi8(a, index, b));
  }
}

DMLOPS_TARGET("avx512f,avx512bw,avx512vbmi")
void zeros_then_even_rows_vbmi(std::byte* dst, std::int64_t dst_row_step, std::int64_t zeros, const std::byte* src,
                               std::int64_t src_row_step, std::int64_t n, std::int64_t rows, int size) {
  const __m512i index = _mm512_load_si512(shuffle_tables().even[size_index(size)]);
  // A row's output bytes [0, zero_bytes) are zeros, [zero_bytes, out_bytes) its elements. Output
  // byte j of the block at output offset o reads byte 2o + j / size * 2 * size + j % size of a
  // virtual input row that starts lead = 2 * zero_bytes bytes before the row, and whose bytes
  // [lead, in_end) are the row's: the input ends with the last element read (its odd neighbour
  // may lie past the row). Loads are masked to those bytes (masked-off bytes are never touched)
  // and load zeros elsewhere, so the zeros' bytes, which read before lead, come out zero. The
  // masks are the same for every row: made once.
  const std::int64_t zero_bytes = zeros * size, out_bytes = zero_bytes + n * size, lead = 2 * zero_bytes;
  const std::int64_t in_end = lead + (n > 0 ? (2 * n - 1) * size : 0);
  const auto edge = [&](std::int64_t o) {
    return EvenBlockMasks{byte_range_mask(lead - 2 * o, in_end - 2 * o), byte_range_mask(lead - 2 * o - 64, in_end - 2 * o - 64),
                          byte_range_mask(-o, out_bytes - o)};
  };
  if (out_bytes <= 64) {
    const EvenBlockMasks only = edge(0);
    for (std::int64_t r = 0; r < rows; ++r, dst += dst_row_step, src += src_row_step) even_block(dst, src - lead, index, only);
    return;
  }
  // The row's first 64 bytes (its zeros, and where its elements start), whole blocks of 64
  // output bytes whose 128 input bytes lie inside the row (2o >= 128 >= lead: zero_bytes <= 64),
  // then the row's last 64 bytes as one more block (it rewrites bytes the blocks before wrote,
  // with the same values).
  const std::int64_t last = out_bytes - 64;
  const EvenBlockMasks first = edge(0), end = edge(last);
  for (std::int64_t r = 0; r < rows; ++r, dst += dst_row_step, src += src_row_step) {
    const std::byte* virtual_row = src - lead;
    even_block(dst, virtual_row, index, first);
    even_whole_blocks(dst, virtual_row, index, 64, last);
    even_block(dst + last, virtual_row + 2 * last, index, end);
  }
}

namespace {
// `available` bytes at p (none past them are touched), zeros after.
DMLOPS_TARGET("avx512f,avx512bw") inline __m512i load_available(const std::byte* p, std::int64_t available) {
  return available >= 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(byte_range_mask(0, available), p);
}

// One block of tap_triple_rows: the even elements of the 128 input bytes a, b to tap 1, the odd
// ones to tap 2, and those returned (tap 0's, one element later).
DMLOPS_ALWAYS_INLINE DMLOPS_TARGET("avx512f,avx512bw,avx512vbmi") inline __m512i triple_block(std::byte* tap1, std::byte* tap2, __m512i a,
                                                                                            __m512i b, __m512i even, __m512i odd) {
  const __m512i odds = _mm512_permutex2var_epi8(a, odd, b);
  _mm512_storeu_si512(tap1, _mm512_permutex2var_epi8(a, even, b));
  _mm512_storeu_si512(tap2, odds);
  return odds;
}

template <int kSize>
DMLOPS_TARGET("avx512f,avx512bw,avx512vbmi")
void tap_triple_rows_sized(std::byte* const* dst, std::int64_t dst_row_step, const std::byte* src, std::int64_t src_row_step,
                           std::int64_t in_width, std::int64_t n, std::int64_t rows) {
  const __m512i even = _mm512_load_si512(shuffle_tables().even[size_index(kSize)]);
  const __m512i odd = _mm512_add_epi8(even, _mm512_set1_epi8(kSize));
  const std::int64_t out_bytes = n * kSize, in_bytes = in_width * kSize, last = out_bytes - 64;
  // Blocks of 64 output bytes, the last one at the row's last 64 bytes (it rewrites bytes the
  // block before wrote, with the same values). Those before `whole` read 128 input bytes inside
  // the row (plain loads); the others (past the row with end padding) and the last one load
  // what lies inside. The masks and this split are the same for every row: made once (made per
  // block, the kernel alone took 1.09x the time on a float16 stride-2 unfold's 56-element rows;
  // whole calls within noise).
  const std::int64_t whole = std::clamp<std::int64_t>(in_bytes >= 128 ? (in_bytes - 128) / 2 + 1 : 0, 0, last);
  const __mmask64 last_a = byte_range_mask(0, in_bytes - 2 * last), last_b = byte_range_mask(0, in_bytes - 2 * last - 64);
  // Tap 0's blocks go one element later than the others': its last block's last element would
  // land past the row.
  const __mmask64 shifted_last = byte_mask(64 - kSize);
  std::byte *tap0 = dst[0], *tap1 = dst[1], *tap2 = dst[2];
  for (std::int64_t r = 0; r < rows; ++r, tap0 += dst_row_step, tap1 += dst_row_step, tap2 += dst_row_step, src += src_row_step) {
    std::memset(tap0, 0, kSize);  // its first element reads the padding
    std::int64_t o = 0;
    for (; o < whole; o += 64) {
      const __m512i odds = triple_block(tap1 + o, tap2 + o, _mm512_loadu_si512(src + 2 * o), _mm512_loadu_si512(src + 2 * o + 64), even, odd);
      _mm512_storeu_si512(tap0 + o + kSize, odds);
    }
    for (; o < last; o += 64) {
      const __m512i odds = triple_block(tap1 + o, tap2 + o, load_available(src + 2 * o, in_bytes - 2 * o),
                                        load_available(src + 2 * o + 64, in_bytes - 2 * o - 64), even, odd);
      _mm512_storeu_si512(tap0 + o + kSize, odds);
    }
    const __m512i odds = triple_block(tap1 + last, tap2 + last, _mm512_maskz_loadu_epi8(last_a, src + 2 * last),
                                      _mm512_maskz_loadu_epi8(last_b, src + 2 * last + 64), even, odd);
    _mm512_mask_storeu_epi8(tap0 + last + kSize, shifted_last, odds);
  }
}
}  // namespace

void tap_triple_rows_vbmi(std::byte* const* dst, std::int64_t dst_row_step, const std::byte* src, std::int64_t src_row_step,
                          std::int64_t in_width, std::int64_t n, std::int64_t rows, int size) {
  if (n * size < 64) fail("tap_triple_rows_vbmi: rows of ", n, " elements of ", size, " bytes; 64 bytes or more are needed");
  visit_size(static_cast<std::size_t>(size), [&](auto tag) {
    constexpr int kSize = sizeof(typename decltype(tag)::type);
    tap_triple_rows_sized<kSize>(dst, dst_row_step, src, src_row_step, in_width, n, rows);
  });
}
#endif

void copy_byte_rows(std::byte* dst, std::int64_t dst_row_step, const std::byte* src, std::int64_t src_row_step,
                    std::size_t n, std::int64_t rows) {
  using Fn = void (*)(std::byte*, std::int64_t, const std::byte*, std::int64_t, std::size_t, std::int64_t);
#if DMLOPS_X86
  static const Fn chosen = avx2_enabled() ? copy_byte_rows_avx2 : copy_byte_rows_baseline;
#else
  static const Fn chosen = copy_byte_rows_baseline;
#endif
  chosen(dst, dst_row_step, src, src_row_step, n, rows);
}

template <class T>
void copy_framed_rows(std::byte* out, std::int64_t out_step, const std::byte* in, const std::int64_t* in_offsets,
                      std::int64_t in_step, std::int64_t rows, const FramedRows& frame, T fill) {
  if (rows <= 0) return;
#if DMLOPS_X86
  if (avx2_enabled()) return framed_rows_avx2<T>(out, out_step, in, in_offsets, in_step, rows, frame, fill);
#endif
  framed_rows_baseline<T>(out, out_step, in, in_offsets, in_step, rows, frame, fill);
}
template void copy_framed_rows<std::uint8_t>(std::byte*, std::int64_t, const std::byte*, const std::int64_t*, std::int64_t,
                                             std::int64_t, const FramedRows&, std::uint8_t);
template void copy_framed_rows<std::uint16_t>(std::byte*, std::int64_t, const std::byte*, const std::int64_t*, std::int64_t,
                                              std::int64_t, const FramedRows&, std::uint16_t);
template void copy_framed_rows<std::uint32_t>(std::byte*, std::int64_t, const std::byte*, const std::int64_t*, std::int64_t,
                                              std::int64_t, const FramedRows&, std::uint32_t);
template void copy_framed_rows<std::uint64_t>(std::byte*, std::int64_t, const std::byte*, const std::int64_t*, std::int64_t,
                                              std::int64_t, const FramedRows&, std::uint64_t);

CopyBytesFn select_copy_bytes() {
#if DMLOPS_X86
  if (avx2_enabled()) return copy_bytes_avx2;
#endif
  return copy_bytes_baseline;
}

}  // namespace dmlops
