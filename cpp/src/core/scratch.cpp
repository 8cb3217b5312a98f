#include "dmlops/core/scratch.hpp"

#include <algorithm>
#include <new>
#include <vector>

namespace dmlops {
namespace {

constexpr std::align_val_t kAlignment{64};

struct Block {
  void* data;
  std::size_t capacity;
};

// The calling thread's free blocks; freed with the thread.
struct Cache {
  std::vector<Block> blocks;
  std::size_t bytes = 0;

  ~Cache() {
    for (const Block& b : blocks) ::operator delete(b.data, kAlignment);
  }
};

thread_local Cache cache;

}  // namespace

ScratchBlock::ScratchBlock(std::size_t bytes) : data_(nullptr), capacity_(std::max<std::size_t>(bytes, 64)) {
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

std::size_t scratch_cached_bytes() { return cache.bytes; }

}  // namespace dmlops
