// Per-thread reusable scratch memory for a kernel's large temporary buffers (packed panels,
// padded planes).
//
// A fresh allocation of a few hundred KiB is a fresh mmap: every call would fault its pages in
// and have the OS zero them again, which costs as much as the arithmetic of a small
// convolution. Scratch<T>(n) takes a block of at least n values from the calling thread's cache
// (or allocates one) and gives it back when destroyed. The cache keeps at most
// kScratchCacheBytes per thread (the smallest blocks go first), so one huge call does not pin
// its memory. The values are uninitialised; blocks are 64-byte aligned.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dmlops {

inline constexpr std::size_t kScratchCacheBytes = std::size_t{32} << 20;

class ScratchBlock {
 public:
  explicit ScratchBlock(std::size_t bytes);
  ~ScratchBlock();
  ScratchBlock(const ScratchBlock&) = delete;
  ScratchBlock& operator=(const ScratchBlock&) = delete;
  void* data() const { return data_; }

 private:
  void* data_;
  std::size_t capacity_;
};

template <class T>
class Scratch {
 public:
  explicit Scratch(std::int64_t n) : block_(static_cast<std::size_t>(n) * sizeof(T)) {}
  T* get() const { return static_cast<T*>(block_.data()); }

 private:
  ScratchBlock block_;
};

// Bytes the calling thread's cache holds now (for tests).
std::size_t scratch_cached_bytes();
// Threads' caches alive now: one per thread that has used scratch and not exited (for tests).
std::size_t scratch_thread_caches();

}  // namespace dmlops
