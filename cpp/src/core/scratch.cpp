#include "dmlops/core/scratch.hpp"

#include <algorithm>
#include <atomic>
#include <vector>

#include "dmlops/core/platform.hpp"

namespace dmlops {
namespace {

// Blocks come from platform::VectorAllocator: aligned to a cache line, large ones advised huge pages
// (packed filters, padded planes, results).
using Bytes = platform::VectorAllocator<std::byte>;
void free_block(const BlockCache::Block& block) noexcept {
  Bytes().deallocate(static_cast<std::byte*>(block.data), block.capacity);
}

std::atomic<std::size_t> g_caches{0};  // caches alive, for tests

// A thread's free blocks: the smallest go first past kScratchCacheBytes.
struct Cache {
  BlockCache blocks{kScratchCacheBytes, BlockCache::Evict::Smallest};

  Cache() { g_caches.fetch_add(1, std::memory_order_relaxed); }
  ~Cache() { g_caches.fetch_sub(1, std::memory_order_relaxed); }
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;
};

void destroy_cache(void* cache) { delete static_cast<Cache*>(cache); }

// The calling thread's cache, freed when the thread exits. The thread_local is a plain pointer
// and the cache is freed by platform::ThreadExitValue, which is handed the pointer: a
// thread_local Cache object, freed by its own destructor, crashed now and then at thread exit
// under MinGW (its emulated TLS storage was already freed and reused).
thread_local Cache* t_cache = nullptr;

Cache& this_thread_cache() {
  if (t_cache == nullptr) {
    static const platform::ThreadExitValue at_exit(destroy_cache);
    t_cache = new Cache;
    at_exit.set(t_cache);
  }
  return *t_cache;
}

}  // namespace

BlockCache::Block BlockCache::take(std::size_t bytes, std::size_t most) {
  auto best = blocks_.end();
  for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
    if (it->capacity >= bytes && it->capacity <= most && (best == blocks_.end() || it->capacity < best->capacity)) best = it;
  }
  if (best == blocks_.end()) return {Bytes().allocate(bytes), bytes};
  const Block block = *best;
  bytes_ -= block.capacity;
  blocks_.erase(best);
  return block;
}

void BlockCache::give(Block block) noexcept {
  if (block.capacity > budget_) {
    free_block(block);
    return;
  }
  try {
    blocks_.push_back(block);
  } catch (...) {
    free_block(block);
    return;
  }
  bytes_ += block.capacity;
  while (bytes_ > budget_) {
    const auto victim = evict_ == Evict::Oldest
                            ? blocks_.begin()
                            : std::min_element(blocks_.begin(), blocks_.end(),
                                               [](const Block& a, const Block& b) { return a.capacity < b.capacity; });
    bytes_ -= victim->capacity;
    free_block(*victim);
    blocks_.erase(victim);
  }
}

std::size_t BlockCache::release() noexcept {
  const std::size_t released = bytes_;
  for (const Block& block : blocks_) free_block(block);
  blocks_.clear();
  bytes_ = 0;
  return released;
}

ScratchBlock::ScratchBlock(std::size_t bytes) {
  const BlockCache::Block block = this_thread_cache().blocks.take(std::max<std::size_t>(bytes, 64));
  data_ = block.data, capacity_ = block.capacity;
}

ScratchBlock::~ScratchBlock() { this_thread_cache().blocks.give({data_, capacity_}); }

std::size_t scratch_cached_bytes() { return this_thread_cache().blocks.bytes(); }

std::size_t scratch_thread_caches() { return g_caches.load(std::memory_order_relaxed); }

}  // namespace dmlops
