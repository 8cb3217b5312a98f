// Row primitives of the data-movement kernels (separable gather, unfold): load, fill and copy
// `n` elements of width sizeof(T) between strided byte addresses.
//
// T is the element's width type from visit_width (uint8/16/32/64_t): bits move unchanged, so
// every dtype of that width (FLOAT16, NaN payloads) is bit-exact. Addresses may be misaligned
// and steps negative or zero; when both sides are unit-stride the row is one copy_bytes or one
// vectorised fill.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/platform.hpp"

namespace dmlops {

// Copies n bytes between buffers that do not overlap. Data-movement kernels copy many short
// rows (hundreds of bytes to a few KiB); for those, glibc's memcpy (size classes, and on AMD a
// `rep movsb` path for mid sizes) costs as much as the data, so with AVX2 they are copied
// inline with 32-byte vectors and aligned stores. Long copies go to memcpy. The variant is
// chosen once; a call is one indirect call (a copy of a 5-D row of 64 floats costs little
// more than the call overhead, so no second dispatch layer).
using CopyBytesFn = void (*)(std::byte* dst, const std::byte* src, std::size_t n);
CopyBytesFn select_copy_bytes();
inline void copy_bytes(std::byte* dst, const std::byte* src, std::size_t n) {
  static const CopyBytesFn chosen = select_copy_bytes();
  chosen(dst, src, n);
}

// copy_bytes of `rows` rows of n bytes, row r at dst + r * dst_row_step and src + r * src_row_step:
// one indirect call for them all, each row copied inline (the runs of a 3x3x3 unfold row are 30
// elements: one call each cost as much as their data).
void copy_byte_rows(std::byte* dst, std::int64_t dst_row_step, const std::byte* src, std::int64_t src_row_step,
                    std::size_t n, std::int64_t rows);

// Rows that are one copy framed by a few single elements: the rows of a padding by a few
// elements each side (the separable gather's border rows). Row r of `rows`, written at
// out + r * out_step from its input row at in + in_offsets[r] (in + r * in_step when in_offsets
// is null), is `heads` elements, the copy, then `tails` elements, back to back; an element
// reads its input byte offset, or at kFramedFill is the fill value. One call walks all the rows
// with its state in registers and copies inline. Called per row (each copy an indirect call,
// the walk's state spilled around it), the walk's own loads waited on the row's stores, which
// miss the cache: on Zen 4, 1 thread, 2x8x16x64x64 float32 edge-padded by one ran 1.35x the time
// of the same rows copied by a loop that kept its state in registers.
constexpr int kMaxFramedElements = 16;
constexpr std::int64_t kFramedFill = std::numeric_limits<std::int64_t>::min();
struct FramedRows {
  int heads = 0, tails = 0;                      // elements before and after the copy
  std::int64_t copy_in = 0, copy_bytes = 0;      // the copy's byte offset in the input row, and length
  std::int64_t element_in[kMaxFramedElements]{};  // per element, in the row's order
};
template <class T>
void copy_framed_rows(std::byte* out, std::int64_t out_step, const std::byte* in, const std::int64_t* in_offsets,
                      std::int64_t in_step, std::int64_t rows, const FramedRows& frame, T fill);

// The last-level cache a call's output can stay in, as the streaming decisions below see it:
// the L3, but at most 32 L2s where it holds over 64 of them. Such an L3 is a many-core socket's
// (the 16-core Xeon VM reports 300 MB, 150 of its 2 MB L2s, spread over a mesh and shared with
// the socket's other cores), and a call's output in it costs about what it costs in memory,
// each line read before it is written: there an 80 MB float64 pad took 0.73-0.77x the time at 1
// thread and 0.75-0.87x at 16 streamed (stream_output with a 32 MB L3), while a 14 MB unfold
// took 1.47x and 1.59x streamed with an 8 MB one. Zen's L3 (32 L2s on Zen 4 and 5, 64 on Zen 3)
// counts whole.
std::int64_t streaming_cache_bytes(const platform::CacheSizes& caches);
std::int64_t streaming_cache_bytes();  // of this CPU's

// Non-temporal ("streaming") copies, for outputs larger than the last-level cache (see
// stream_output and streaming_cache_bytes). A freshly allocated output's pages are zeroed by the
// OS on first touch; a copy with ordinary stores then pays for those zeroed lines as well (an
// 80 MB pad ran at 55% of
// a copy, a 47 MB unfold at 60%), while stores that bypass the cache write each line once, as
// memcpy does for copies of that size. Runs under 4 KiB are not streamed (see rows.cpp).
// Streaming stores are weakly ordered: a task that streamed calls stream_fence() before it
// ends, so that whoever waits for it sees the data.
bool stream_output(std::int64_t output_bytes);
// Whether a kernel that can write its output through a buffer in L1, whole lines at a time
// (LineStreamer), streams it (whatever stream_output says): an output at least twice its
// input, when input and output together exceed staged_cache_bytes (three quarters of the
// last-level cache; three eighths on one thread of a Zen 4, below), so that what fits with a
// quarter to spare stays in cache for whatever reads it next. On a 2-vCPU
// Zen 5 (32 MB L3), paired: nearest upsamplings by 2x2 of 18-24 MB (input and output) took
// 0.55-0.99x the time at 1 thread (one run of six pairs: 0.80-1.14x) and 0.43-0.61x at 2 threads
// kept in cache rather than streamed, a 20 MB 3x3 unfold 0.43-0.49x and 0.31x; the streamed
// output went out at ~30 GB/s, a copy within L3 several times faster. Runs on other days
// moved with the L3's other tenants (1 thread: 0.65-1.40x in cache on one, 0.47-0.52x on
// another, 0.61x with a process copying 128 MB on the other core), but a copy of the output's
// bytes, the speed data movement is measured against, lives in the same cache: streamed, the
// 21 MB upsampling ran at 47-74% of that copy, in cache at 133-155%. (31 MB, past the
// threshold: streamed 0.89x the time at 1 thread, 1.63x at 2.) The threshold had been
// half the cache, from a 2-vCPU Zen 4 (an L3 that other tenants share): there a 16 MB nearest
// upsampling of a 4 MB input ran at a third of a copy's speed on 1 thread in cache, and a 21 MB
// one on 2 threads took 1.65x the time it took streamed. Twice the input: streamed stores lose
// where reads are as many as writes (a 1:1 padding of 66 MB took 1.6x the time streamed on Zen
// 4), and win where writes dominate (upsampling 2x in one axis: 0.5-0.9x the time at 48 MB; by
// 2x2: 0.4-0.6x).
bool stream_staged(std::int64_t input_bytes, std::int64_t output_bytes);
// The input and output bytes past which stream_staged streams: three quarters of
// streaming_cache_bytes, but three eighths on one thread of a Zen 4 (CpuFeatures::zen4). On a
// 2-vCPU Zen 4 (32 MB L3 shared with other tenants), paired (cache sizes or builds alternating
// so that only this bound moved), nearest upsamplings and resamplings of 11-23 MB (input and
// output) in cache against streamed moved with the neighbours, within a day too. One thread:
// 0.60-0.91x the time in cache in quiet hours (21-23 MB 1.24-1.47x), 1.15-2.6x in busy ones
// (presumably when the L3 has lost the last call's output: each store then reads its line from
// memory first, with only one core's misses in flight; streamed, ~27 GB/s either way). Two
// threads: 20-23 MB 0.37-0.67x the time in cache in quiet and busy hours of two days (11-18 MB
// 0.31-0.34x, a 32 MB unfold 0.90x and 1.06-1.18x), 1.5-1.8x on one earlier day; so more
// threads take the three quarters every other CPU does (a 2x2 upsampling of 20.8 MB at 2
// threads: 56% of a copy streamed, 95-105% in cache).
std::int64_t staged_cache_bytes(const platform::CacheSizes& caches, bool zen4, int threads);
std::int64_t staged_cache_bytes();  // of this CPU's
void stream_bytes(std::byte* dst, const std::byte* src, std::size_t n);
void stream_fence();

// Consecutive writes of one task to one output, streamed a whole cache line at a time: the
// bytes of a line that the next write continues wait here, so a line is never written partly
// with streaming and partly with ordinary stores (that mix cost a 288 MB pad of 1 KiB rows
// 1.6-4.5x its time on Zen 4). Only the first line of a stretch and the last, when the stretch
// does not cover them whole, are written with ordinary stores. finish() writes what waits and
// fences; a write that does not continue the last one finishes first.
class LineStreamer {
 public:
  LineStreamer() = default;
  LineStreamer(const LineStreamer&) = delete;
  LineStreamer& operator=(const LineStreamer&) = delete;
  ~LineStreamer() { finish(); }
  void write(std::byte* dst, const std::byte* src, std::size_t n);
  void finish();

 private:
  static constexpr std::size_t kLine = 64;
  std::byte* line_ = nullptr;  // the line whose first `waiting_` bytes wait in `pending_`
  std::size_t waiting_ = 0;
  bool streamed_ = false;  // a streaming store since the last fence
  alignas(kLine) std::byte pending_[kLine];
};

// One stretch of output, [dst, ...), written from pieces appended in order (copies of
// contiguous source bytes, zeros) in whole lines by streaming stores, each line put together in
// a register: the bytes still waiting from the pieces before, blended with a masked load of the
// next piece at its place in the line (available(): AVX-512BW). Staged through a buffer in L1
// instead (StreamedRow, LineStreamer), the gather's ordinary stores into the buffer wait behind
// the last batch's streaming stores: on Zen 4, 1 thread, runs of 120 bytes packed into 47 MB
// took 1.6x the time of the same assembled in registers, which ran as fast as streaming an L1
// buffer over and over (~1.8 ms). The stretch's first line, when it starts inside one, and the
// last are written with ordinary masked stores by finish(); the caller fences (stream_fence)
// before its task ends. Without AVX-512BW the pieces are copied with ordinary stores.
class LineAssembler {
 public:
  static bool available();
  explicit LineAssembler(std::byte* dst);
  LineAssembler(const LineAssembler&) = delete;
  LineAssembler& operator=(const LineAssembler&) = delete;
  ~LineAssembler() { finish(); }
  void copy(const std::byte* src, std::size_t n) { copy_rows(src, 0, n, 1, 0); }
  // `rows` runs of n bytes, run r at src + r * src_step, with `gap` zero bytes between two.
  void copy_rows(const std::byte* src, std::int64_t src_step, std::size_t n, std::int64_t rows, std::size_t gap);
  void zeros(std::size_t n);
  // Writes the bytes that wait; appending may go on after it.
  void finish();

  struct State {
    std::byte* line;       // the line being assembled: its bytes [head, waiting) wait in `carry`
    std::int64_t head;     // bytes of `line` before the stretch, not ours to write
    std::int64_t waiting;
    alignas(64) std::byte carry[64];
  };

 private:
  State state_;
};

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Fills this long or longer take AVX2's stores (IsaKernel), twice the width of the baseline's:
// on Zen 5, 1 thread, paired, 2x8x16x64x64 float32 padded by 1 with zeros (two planes of 18 a
// fill) took 0.95-0.97x the time, 2x8x1x64x64 0.80x; other pads 0.99-1.02x. Bytes keep the
// baseline's fill_n, a memset call: with AVX2's loop a uint8 1080p image padded by 16 took 1.07-1.10x.
constexpr std::int64_t kWideFillBytes = 256;

template <class T>
DMLOPS_ALWAYS_INLINE inline void fill_contiguous(T* dst, T value, std::int64_t n) {
  std::fill_n(dst, n, value);
}

template <class T>
void fill_row(std::byte* dst, std::int64_t dst_step, T value, std::int64_t n) {
  if (n <= 2) {  // short fills (a window's edge) cost more as a memset call than as stores
    if (n > 0) std::memcpy(dst, &value, sizeof(T));
    if (n > 1) std::memcpy(dst + dst_step, &value, sizeof(T));
    return;
  }
  if (dst_step == sizeof(T) && reinterpret_cast<std::uintptr_t>(dst) % alignof(T) == 0) {
    if (sizeof(T) > 1 && n * std::int64_t{sizeof(T)} >= kWideFillBytes)
      return IsaKernel<&fill_contiguous<T>>::run(reinterpret_cast<T*>(dst), value, n);
    std::fill_n(reinterpret_cast<T*>(dst), n, value);  // vectorised by the compiler
    return;
  }
  for (std::int64_t i = 0; i < n; ++i, dst += dst_step) std::memcpy(dst, &value, sizeof(T));
}

// `rows` runs of n contiguous elements, row_step bytes apart, set to value (the zeros between the
// rows of a box copied whole: a 3x3 unfold's padding column). Runs of one or two elements are
// stores in one loop: as a fill_row call each (55 per plane), a float16 3x3 unfold of
// 1x64x56x56 took 1.45x the time on Zen 3.
template <class T>
void fill_rows(std::byte* dst, std::int64_t row_step, T value, std::int64_t n, std::int64_t rows) {
  if (n > 2) {
    for (std::int64_t r = 0; r < rows; ++r, dst += row_step) fill_row<T>(dst, sizeof(T), value, n);
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r, dst += row_step) {
    for (std::int64_t i = 0; i < n; ++i) std::memcpy(dst + i * std::int64_t{sizeof(T)}, &value, sizeof(T));
  }
}

// dst[i] = src[-i]: a mirrored stretch (reflection and symmetric padding). Typed, so the
// compiler vectorises it with lane permutes.
template <class T>
DMLOPS_ALWAYS_INLINE inline void copy_reversed(T* dst, const T* src, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = src[-i];
}

// dst[i] = src[2i] (a stride-2 window). Elements narrower than 8 bytes are read as pairs whose
// low half is the even element (little-endian), so the loop is a truncation, which compilers
// vectorise as a pack or a single narrowing move; as a deinterleave, SSE2's chain of unpacks
// took two thirds of a float16 stride-2 unfold. The last element is read alone: its pair would
// reach one element past what the window reads.
template <class T>
DMLOPS_ALWAYS_INLINE inline void copy_even(T* dst, const std::byte* src, std::int64_t n) {
  if constexpr (sizeof(T) < 8 && std::endian::native == std::endian::little) {
    using Pair = std::conditional_t<sizeof(T) == 1, std::uint16_t,
                                    std::conditional_t<sizeof(T) == 2, std::uint32_t, std::uint64_t>>;
    for (std::int64_t i = 0; i + 1 < n; ++i) dst[i] = static_cast<T>(load<Pair>(src + i * std::int64_t{sizeof(Pair)}));
    if (n > 0) dst[n - 1] = load<T>(src + (n - 1) * std::int64_t{sizeof(Pair)});
  } else {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = load<T>(src + i * 2 * std::int64_t{sizeof(T)});
  }
}

// copy_even over `rows` rows: row r from src + r * src_row_step to dst + r * dst_row_step. One
// dispatch for a block of short stride-2 rows (a strided unfold's rows are a few dozen elements,
// and a call chain per row cost about as much as the copy).
template <class T>
DMLOPS_ALWAYS_INLINE inline void copy_even_rows(std::byte* dst, std::int64_t dst_row_step, const std::byte* src,
                                                std::int64_t src_row_step, std::int64_t n, std::int64_t rows) {
  for (std::int64_t r = 0; r < rows; ++r)
    copy_even<T>(reinterpret_cast<T*>(dst + r * dst_row_step), src + r * src_row_step, n);
}

// The longest repeat the byte-permute kernel takes (one table of k vectors per count).
inline constexpr int kMaxRepeatVbmi = 8;

#if DMLOPS_X86
// With avx512_vbmi_enabled(): the shuffles of nearest upsampling and of stride-2 windows as one
// byte permute (vpermb, vpermt2b) per 64 output bytes, for elements of `size` = 1, 2, 4 or 8
// bytes. The compilers' code for the loops above shuffles within 16-byte lanes, or element by
// element for a repeat of 3: at 16 threads, where the data stays in the caches, a uint8 x3
// upsampling ran at 47% and a float16 stride-2 unfold at 46% of a copy of the same bytes.
//
// n elements from src, each written k times in a row to dst (2 <= k <= kMaxRepeatVbmi).
void repeat_elements_vbmi(std::byte* dst, const std::byte* src, std::int64_t n, int size, int k);
// repeat_rows' byte permute (2 <= k <= kMaxRepeatVbmi).
void repeat_rows_vbmi(std::byte* const* outs, const std::byte* const* ins, int count, std::int64_t n, int size, int k,
                      std::int64_t copies, std::int64_t copy_stride);
// copy_even_rows: dst[i] = src[2i] for i < n, over `rows` rows.
void copy_even_rows_vbmi(std::byte* dst, std::int64_t dst_row_step, const std::byte* src, std::int64_t src_row_step,
                         std::int64_t n, std::int64_t rows, int size);
// The same after `zeros` zero elements: dst[i] = 0 for i < zeros, dst[zeros + i] = src[2i] for
// i < n, over `rows` rows; 0 < zeros * size <= 64. A window's padding before its first input
// element goes out in the row's first store: written apart, element by element, those zeros
// took a sixth of a float16 stride-2 3x3 unfold's time (Zen 4, 1 thread). (Rows without zeros
// keep copy_even_rows_vbmi's plain loads and stores.)
void zeros_then_even_rows_vbmi(std::byte* dst, std::int64_t dst_row_step, std::int64_t zeros, const std::byte* src,
                               std::int64_t src_row_step, std::int64_t n, std::int64_t rows, int size);
// The three taps of a stride-2 window of width 3 padded by one element, along rows of
// in_width elements of `size` bytes: dst[0][i] = src[2i - 1], dst[1][i] = src[2i],
// dst[2][i] = src[2i + 1], zero where that index lies outside [0, in_width), i < n, over `rows`
// rows; n * size >= 64 (tap_triple_rows_vbmi_take). Taps 0 and 2 read the same odd elements,
// tap 0 one element later: two loads and two permutes per 64 bytes of each of the three rows,
// where a row at a time takes two loads and a permute per 64 bytes of each (the loads were the
// bound: a float16 3x3 stride-2 unfold of 1x64x112x112, Zen 4, 1 thread: 0.83x the time in
// its rows' kernel).
void tap_triple_rows_vbmi(std::byte* const* dst, std::int64_t dst_row_step, const std::byte* src, std::int64_t src_row_step,
                          std::int64_t in_width, std::int64_t n, std::int64_t rows, int size);
inline bool tap_triple_rows_vbmi_take(std::int64_t n, std::size_t size) {
  return n >= 64 / static_cast<std::int64_t>(size) && avx512_vbmi_enabled();
}

// zeros_then_even_rows with AVX2, for rows of more than a vector (n * size > 32): two loads, a
// narrowing within 128-bit lanes and a lane permute per 32 output bytes, the zeros stored as
// vectors. The compiler's loop (copy_even) narrows 16 bytes at a time and finishes each row
// element by element: a 3x3 stride-2 unfold of 1x64x112x112 (rows of 56) took 0.48-0.50x the
// time in uint8, 0.58-0.78x in float32, 0.86-0.89x in float16 on a 2-vCPU Zen 3 (1 thread,
// alternating, 21 rounds twice); on the 16-core Xeon with AVX-512 switched off 0.67x, 0.88x and
// 0.81x (medians of three alternating processes).
void zeros_then_even_rows_avx2(std::byte* dst, std::int64_t dst_row_step, std::int64_t zeros, const std::byte* src,
                               std::int64_t src_row_step, std::int64_t n, std::int64_t rows, int size);
// Whether zeros_then_even_rows_avx2 takes rows of n elements of `size` bytes.
inline bool even_rows_avx2(std::int64_t n, std::size_t size) { return n * static_cast<std::int64_t>(size) > 32 && avx2_enabled(); }
// dst[2j] += src[j] for j < n with AVX2 (add_row's stride-2 case).
void add_to_even_avx2(const float* src, std::int64_t n, float* dst);
#endif

// copy_even_rows on rows aligned to T: the byte permute where the CPU has it, else AVX2's
// narrowing for rows longer than a vector, else the compiler's vectorised loop.
template <class T>
DMLOPS_ALWAYS_INLINE inline void copy_even_aligned_rows(std::byte* dst, std::int64_t dst_row_step, const std::byte* src, std::int64_t src_row_step,
                            std::int64_t n, std::int64_t rows) {
#if DMLOPS_X86
  if (avx512_vbmi_enabled()) return copy_even_rows_vbmi(dst, dst_row_step, src, src_row_step, n, rows, sizeof(T));
  if (even_rows_avx2(n, sizeof(T))) return zeros_then_even_rows_avx2(dst, dst_row_step, 0, src, src_row_step, n, rows, sizeof(T));
#endif
  IsaKernel<&copy_even_rows<T>>::run(dst, dst_row_step, src, src_row_step, n, rows);
}

// tap_triple_rows_vbmi's rows: the byte permute where the CPU has it and the rows are long
// enough, else element by element.
template <class T>
void tap_triple_rows(std::byte* const* dst, std::int64_t dst_row_step, const std::byte* src, std::int64_t src_row_step,
                     std::int64_t in_width, std::int64_t n, std::int64_t rows) {
#if DMLOPS_X86
  if (tap_triple_rows_vbmi_take(n, sizeof(T)))
    return tap_triple_rows_vbmi(dst, dst_row_step, src, src_row_step, in_width, n, rows, static_cast<int>(sizeof(T)));
#endif
  constexpr auto size = static_cast<std::int64_t>(sizeof(T));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t tap = 0; tap < 3; ++tap) {
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t at = 2 * i + tap - 1;
        const T value = at >= 0 && at < in_width ? load<T>(src + r * src_row_step + at * size) : T{0};
        std::memcpy(dst[tap] + r * dst_row_step + i * size, &value, sizeof(T));
      }
    }
  }
}

// n source elements, each written K times in a row. With K known at compile time the compiler
// turns this into vector loads, shuffles and stores (IsaKernel's AVX2 variant: wider stores,
// lane-crossing shuffles for K = 3).
template <class T, int K>
DMLOPS_ALWAYS_INLINE inline void repeat_body(std::byte* dst, const std::byte* src, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const T v = load<T>(src + i * static_cast<std::int64_t>(sizeof(T)));
    for (int j = 0; j < K; ++j) std::memcpy(dst + (i * K + j) * static_cast<std::int64_t>(sizeof(T)), &v, sizeof(T));
  }
}

// n contiguous source elements, each written k >= 1 times to contiguous destination elements
// (nearest upsampling by an integer factor): the byte permute for k up to kMaxRepeatVbmi where
// the CPU has it, else the compiled repeats for k up to 4, else a fill per element.
template <class T>
void repeat_contiguous(std::byte* dst, const std::byte* src, std::int64_t n, std::int64_t k) {
#if DMLOPS_X86
  if (k >= 2 && k <= kMaxRepeatVbmi && avx512_vbmi_enabled())
    return repeat_elements_vbmi(dst, src, n, sizeof(T), static_cast<int>(k));
#endif
  switch (k) {
    case 2: return IsaKernel<&repeat_body<T, 2>>::run(dst, src, n);
    case 3: return IsaKernel<&repeat_body<T, 3>>::run(dst, src, n);
    case 4: return IsaKernel<&repeat_body<T, 4>>::run(dst, src, n);
  }
  constexpr auto e = static_cast<std::int64_t>(sizeof(T));
  for (std::int64_t i = 0; i < n; ++i) fill_row<T>(dst + i * k * e, e, load<T>(src + i * e), k);
}

// repeat_contiguous over `count` rows, each also written copies - 1 more times: row r's n
// elements at ins[r], each written k times at outs[r] and at outs[r] + j * copy_stride for
// 0 < j < copies (nearest upsampling by k along the last axis and by `copies` along the one
// before). One call for a batch of rows: the rows, then their copies. Called per row through the
// runs' dispatch, with a copy call per row, 1x16x8x64x64 float32 upsampled 2x2 spent 28% of its
// time (Zen 4, 1 thread) between the permutes and the copies.
template <class T>
void repeat_rows(std::byte* const* outs, const std::byte* const* ins, int count, std::int64_t n, std::int64_t k,
                 std::int64_t copies, std::int64_t copy_stride) {
#if DMLOPS_X86
  if (k >= 2 && k <= kMaxRepeatVbmi && avx512_vbmi_enabled())
    return repeat_rows_vbmi(outs, ins, count, n, sizeof(T), static_cast<int>(k), copies, copy_stride);
#endif
  for (int r = 0; r < count; ++r) repeat_contiguous<T>(outs[r], ins[r], n, k);
  const auto bytes = static_cast<std::size_t>(n * k) * sizeof(T);
  for (int r = 0; r < count; ++r) {
    for (std::int64_t j = 1; j < copies; ++j) copy_bytes(outs[r] + j * copy_stride, outs[r], bytes);
  }
}

// dst[j] += src[j] for j < n, vectorised by the compiler (IsaKernel: AVX2 where the CPU has it;
// the sums are the same bits on either).
template <class Acc>
DMLOPS_ALWAYS_INLINE inline void add_contiguous(Acc* dst, const Acc* src, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) dst[j] = static_cast<Acc>(dst[j] + src[j]);
}

// dst[j * step] += src[j] for j < n: the accumulation of col2im (fold, transposed convolution).
// Unsigned sums wrap. A float row with step 2 goes eight sums per AVX2 step, which reads and
// writes back the odd entries up to dst[2n - 1] unchanged: dst must extend that far (one entry
// of slack past the last target) and no other thread may write those entries.
template <class Acc>
void add_row(Acc* dst, std::int64_t step, const Acc* src, std::int64_t n) {
#if DMLOPS_X86
  if constexpr (std::is_same_v<Acc, float>) {
    if (step == 2 && avx2_enabled()) return add_to_even_avx2(src, n, dst);
  }
#endif
  if (step == 1) return IsaKernel<&add_contiguous<Acc>>::run(dst, src, n);
  for (std::int64_t j = 0; j < n; ++j) dst[j * step] = static_cast<Acc>(dst[j * step] + src[j]);
}

// src_step 0 broadcasts one element.
template <class T>
void copy_row(std::byte* dst, std::int64_t dst_step, const std::byte* src, std::int64_t src_step, std::int64_t n) {
  if (src_step == 0) return fill_row<T>(dst, dst_step, load<T>(src), n);
  if (dst_step == sizeof(T) && src_step == sizeof(T)) {
    copy_bytes(dst, src, static_cast<std::size_t>(n) * sizeof(T));
    return;
  }
  if (dst_step == sizeof(T) && src_step == -static_cast<std::int64_t>(sizeof(T)) &&
      reinterpret_cast<std::uintptr_t>(dst) % alignof(T) == 0 && reinterpret_cast<std::uintptr_t>(src) % alignof(T) == 0) {
    return IsaKernel<&copy_reversed<T>>::run(reinterpret_cast<T*>(dst), reinterpret_cast<const T*>(src), n);
  }
  if (dst_step == sizeof(T) && src_step == 2 * sizeof(T) && reinterpret_cast<std::uintptr_t>(dst) % alignof(T) == 0 &&
      reinterpret_cast<std::uintptr_t>(src) % alignof(T) == 0) {
    return copy_even_aligned_rows<T>(dst, 0, src, 0, n, 1);
  }
  for (std::int64_t i = 0; i < n; ++i, dst += dst_step, src += src_step) std::memcpy(dst, src, sizeof(T));
}

// copy_row over `rows` rows, row r at dst + r * dst_row_step and src + r * src_row_step: packed
// rows as one copy_byte_rows call, aligned stride-2 rows as one copy_even_rows call.
template <class T>
void copy_rows(std::byte* dst, std::int64_t dst_row_step, std::int64_t dst_step, const std::byte* src,
               std::int64_t src_row_step, std::int64_t src_step, std::int64_t n, std::int64_t rows) {
  if (rows > 1 && dst_step == sizeof(T) && src_step == sizeof(T))
    return copy_byte_rows(dst, dst_row_step, src, src_row_step, static_cast<std::size_t>(n) * sizeof(T), rows);
  if (rows > 1 && dst_step == sizeof(T) && src_step == 2 * sizeof(T) &&
      (reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src) |
       static_cast<std::uintptr_t>(dst_row_step) | static_cast<std::uintptr_t>(src_row_step)) % alignof(T) == 0)
    return copy_even_aligned_rows<T>(dst, dst_row_step, src, src_row_step, n, rows);
  for (std::int64_t r = 0; r < rows; ++r) copy_row<T>(dst + r * dst_row_step, dst_step, src + r * src_row_step, src_step, n);
}

// copy_rows of stride-2 rows (dst[i] = src[2i], i < n) after `zeros` zero elements each: dst
// points at a row's zeros, src at its first element read. With the byte permute the zeros go out
// with the row's first store (zeros_then_even_rows_vbmi), with AVX2 as vectors in the same pass
// (zeros_then_even_rows_avx2); elsewhere they are filled first.
template <class T>
void zeros_then_even_rows(std::byte* dst, std::int64_t dst_row_step, std::int64_t zeros, const std::byte* src,
                          std::int64_t src_row_step, std::int64_t n, std::int64_t rows) {
  constexpr auto size = static_cast<std::int64_t>(sizeof(T));
#if DMLOPS_X86
  if (zeros > 0 && zeros * size <= 64 && avx512_vbmi_enabled())
    return zeros_then_even_rows_vbmi(dst, dst_row_step, zeros, src, src_row_step, n, rows, static_cast<int>(size));
  if (!avx512_vbmi_enabled() && even_rows_avx2(n, sizeof(T)))
    return zeros_then_even_rows_avx2(dst, dst_row_step, zeros, src, src_row_step, n, rows, static_cast<int>(size));
#endif
  fill_rows<T>(dst, dst_row_step, T{0}, zeros, rows);
  copy_rows<T>(dst + zeros * size, dst_row_step, size, src, src_row_step, 2 * size, n, rows);
}

}  // namespace dmlops
