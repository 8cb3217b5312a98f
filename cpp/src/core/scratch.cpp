#include "dmlops/core/scratch.hpp"

#include <algorithm>
#include <atomic>
#include <new>
#include <vector>

#include "dmlops/core/platform.hpp"

namespace dmlops {
namespace {

constexpr std::align_val_t kAlignment{64};

struct Block {
  void* data;
  std::size_t capacity;
};

std::atomic<std::size_t> g_caches{0};  // caches alive, for tests

// A thread's free blocks.
struct Cache {
  std::vector<Block> blocks;
  std::size_t bytes = 0;

  Cache() { g_caches.fetch_add(1, std::memory_order_relaxed); }
  ~Cache() {
    for (const Block& b : blocks) ::operator delete(b.data, kAlignment);
    g_caches.fetch_sub(1, std::memory_order_relaxed);
  }
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

ScratchBlock::ScratchBlock(std::size_t bytes) : data_(nullptr), capacity_(std::max<std::size_t>(bytes, 64)) {
  Cache& cache = this_thread_cache();
  // The smallest cached block that is large enough.
  auto best = cache.blocks.end();
  for (auto it = cache.blocks.begin(); it != cache.blocks.end(); ++it) {
    if (it->capacity >= capacity_ && (best == cache.blocks.end() || it->capacity < best->capacity)) best = it;
  }
  if (best != cache.blocks.end()) {
    data_ = best->data;
    capacity_ = best->capacity;
    cache.bytes -= capacity_;
    cache.blocks.erase(best);
    return;
  }
  data_ = ::operator new(capacity_, kAlignment);
}

ScratchBlock::~ScratchBlock() {
  if (capacity_ > kScratchCacheBytes) {
    ::operator delete(data_, kAlignment);
    return;
  }
  Cache& cache = this_thread_cache();
  cache.blocks.push_back({data_, capacity_});
  cache.bytes += capacity_;
  while (cache.bytes > kScratchCacheBytes) {  // drop the smallest blocks first
    const auto smallest = std::min_element(cache.blocks.begin(), cache.blocks.end(),
                                           [](const Block& a, const Block& b) { return a.capacity < b.capacity; });
    cache.bytes -= smallest->capacity;
    ::operator delete(smallest->data, kAlignment);
    cache.blocks.erase(smallest);
  }
}

std::size_t scratch_cached_bytes() { return this_thread_cache().bytes; }

std::size_t scratch_thread_caches() { return g_caches.load(std::memory_order_relaxed); }

}  // namespace dmlops
