// A thread's last few results of a costly set-up (resampling's index and weight tables, the
// gather's plan), for calls that repeat: a model's layers, a loop over frames, a benchmark.
//
// A call whose key matches one of the last N kept gets that value, shared and immutable; else
// it makes its own, and keeps it only when it is small enough (the caller says), so a few huge
// calls do not pin their set-up's memory. Per thread (each caller declares it thread_local): no
// locks, and a value is reused only by the thread that made it.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <utility>

namespace dmlops {

template <class Key, class Value, std::size_t N = 4>
class RecentValues {
 public:
  // The value of the first kept key for which matches(key) is true; nullptr: none.
  template <class Matches>
  std::shared_ptr<const Value> find(Matches&& matches) const {
    for (const Entry& e : entries_) {
      if (e.value && matches(e.key)) return e.value;
    }
    return nullptr;
  }
  // Keeps (key, value) in place of the oldest entry.
  void keep(Key key, std::shared_ptr<const Value> value) {
    entries_[next_] = Entry{std::move(key), std::move(value)};
    next_ = (next_ + 1) % N;
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
