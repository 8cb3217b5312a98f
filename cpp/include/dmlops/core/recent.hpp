// A thread's last few results of a costly set-up (resampling's index and weight tables, the
// gather's plan), for calls that repeat: a model's layers, a loop over frames, a benchmark.
//
// A call whose key matches one of the last N kept gets that value, shared and immutable; else
// it makes its own, and keeps it only when it spans at most kMaxKeptPositions output positions
// (summed over the axes): larger set-ups can take megabytes, and the data they move costs far
// more than building them. Per thread (each caller declares it thread_local): no locks, and a
// value is reused only by the thread that made it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace dmlops {

inline constexpr std::int64_t kMaxKeptPositions = std::int64_t{1} << 16;

template <class Key, class Value, std::size_t N = 4>
class RecentValues {
 public:
  // The value kept under the first key for which matches(key) is true; else make()'s (a
  // shared_ptr<const Value>), kept under make_key() when `positions` <= kMaxKeptPositions.
  template <class Matches, class Make, class MakeKey>
  std::shared_ptr<const Value> get(Matches&& matches, Make&& make, std::int64_t positions, MakeKey&& make_key) {
    for (const Entry& e : entries_) {
      if (e.value && matches(e.key)) return e.value;
    }
    std::shared_ptr<const Value> value = make();
    if (positions <= kMaxKeptPositions) {
      entries_[next_] = Entry{make_key(), value};
      next_ = (next_ + 1) % N;
    }
    return value;
  }

 private:
  struct Entry {
    Key key;
    std::shared_ptr<const Value> value;
  };
  std::array<Entry, N> entries_{};
  std::size_t next_ = 0;  // the entry replaced next (the oldest)
};

}  // namespace dmlops
