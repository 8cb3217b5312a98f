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
#include <vector>

namespace dmlops {

inline constexpr std::size_t kScratchCacheBytes = std::size_t{32} << 20;

// Free 64-byte aligned blocks kept for reuse, at most `budget` bytes of them: the one cache
// behind both the threads' scratch (below) and the Python bindings' large results. Not
// synchronised: its owner is one thread, or holds a lock.
class BlockCache {
 public:
  struct Block {
    void* data;
    std::size_t capacity;
  };
  // Which blocks go first when the cache holds more than its budget.
  enum class Evict { Smallest, Oldest };

  BlockCache(std::size_t budget, Evict evict) : budget_(budget), evict_(evict) {}
  ~BlockCache() { release(); }
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // The smallest cached block whose capacity is in [bytes, most], taken out of the cache; else
  // a new block of `bytes`.
  Block take(std::size_t bytes, std::size_t most = SIZE_MAX);
  // Keeps `block` (a block larger than the whole budget is freed at once), then frees blocks
  // while the cache holds more than its budget.
  void give(Block block) noexcept;
  // Frees every cached block; returns their bytes.
  std::size_t release() noexcept;
  std::size_t bytes() const { return bytes_; }

 private:
  const std::size_t budget_;
  const Evict evict_;
  std::size_t bytes_ = 0;
  std::vector<Block> blocks_;  // oldest first
};

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
