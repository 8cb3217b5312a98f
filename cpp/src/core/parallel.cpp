#include "dmlops/core/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "dmlops/core/error.hpp"
#include "dmlops/core/platform.hpp"

namespace dmlops {
namespace {

// How long a thread polls before it blocks, when it waits for the next job (a worker) or for
// the workers to finish (the caller). Waking a blocked thread costs tens of microseconds on
// virtual machines (the idle vCPU must be woken too): as long as a whole small kernel, so a
// second thread would not pay off for sub-millisecond calls. A brief poll catches the next
// call of a loop, or a worker finishing, while awake; it is bounded so that an idle process
// stops using CPU at once.
constexpr auto kSpinTime = std::chrono::microseconds(200);

// Polls `ready` for up to kSpinTime; returns whether it became true. Pauses between polls, and
// yields now and then so that a spinning thread does not hold back the others when there are
// more threads than CPUs.
template <class Ready>
bool spin_until(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (unsigned i = 1;; ++i) {
    if (ready()) return true;
    if (i % 16 == 0) {
      if (std::chrono::steady_clock::now() > deadline) return ready();
      std::this_thread::yield();
    } else {
      platform::cpu_relax();
    }
  }
}

// True on a thread while it runs a chunk: a nested parallel_for then runs inline.
thread_local bool t_inside_chunk = false;

class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard lock(mutex_);
      stop_.store(true);
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn over `chunks` equal parts of [begin, end) on every thread including the caller,
  // each thread taking the next part until none is left.
  void run(std::int64_t begin, std::int64_t end, std::int64_t chunks, const RangeFn& fn) {
    {
      std::lock_guard lock(mutex_);
      fn_ = &fn;
      begin_ = begin;
      end_ = end;
      chunks_ = chunks;
      next_chunk_.store(0);
      failed_.store(false);
      error_ = nullptr;
      checked_in_.store(0);
      generation_.fetch_add(1);  // publishes the job to workers polling without the mutex
    }
    wake_.notify_all();
    run_chunks();
    const int workers = static_cast<int>(workers_.size());
    if (!spin_until([&] { return checked_in_.load() == workers; })) {
      std::unique_lock lock(mutex_);
      done_.wait(lock, [&] { return checked_in_.load() == workers; });
    }
    std::lock_guard lock(mutex_);  // orders the workers' last writes (error_) before reading them
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void worker_loop() {
    std::uint64_t seen = 0;
    const auto job_or_stop = [&] { return stop_.load() || generation_.load() != seen; };
    for (;;) {
      if (!spin_until(job_or_stop)) {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, job_or_stop);
      }
      if (stop_.load()) return;
      seen = generation_.load();
      run_chunks();
      {
        std::lock_guard lock(mutex_);
        checked_in_.fetch_add(1);
      }
      done_.notify_one();
    }
  }

  void run_chunks() {
    t_inside_chunk = true;
    const std::int64_t length = end_ - begin_;
    for (std::int64_t c = next_chunk_.fetch_add(1); c < chunks_; c = next_chunk_.fetch_add(1)) {
      if (failed_.load(std::memory_order_relaxed)) continue;  // skip the rest after a failure
      try {
        (*fn_)(begin_ + length * c / chunks_, begin_ + length * (c + 1) / chunks_);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
        failed_.store(true);
      }
    }
    t_inside_chunk = false;
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  // Written under mutex_ (so that blocking waits cannot miss a change), read with or without it
  // (by polling threads): atomics, sequentially consistent.
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> checked_in_{0};
  // The current job; written under mutex_ before generation_ changes, read by the workers after.
  const RangeFn* fn_ = nullptr;
  std::int64_t begin_ = 0, end_ = 0, chunks_ = 0;
  std::atomic<std::int64_t> next_chunk_{0};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
};

// Process-wide state. The mutexes live in raw storage so the fork handler can re-create them
// in the child, where a thread of the parent may have held them at the time of the fork.
alignas(std::mutex) unsigned char g_run_storage[sizeof(std::mutex)];     // one job on the pool at a time
alignas(std::mutex) unsigned char g_config_storage[sizeof(std::mutex)];  // guards g_pool, g_threads
ThreadPool* g_pool = nullptr;
int g_threads = 0;  // 0: not chosen yet, use default_num_threads()

std::mutex& run_mutex() { return *std::launder(reinterpret_cast<std::mutex*>(g_run_storage)); }
std::mutex& config_mutex() { return *std::launder(reinterpret_cast<std::mutex*>(g_config_storage)); }

void after_fork_in_child() {
  // The parent's worker threads do not exist here: forget the pool (leaking it, since its
  // destructor would join threads that are gone) and start with unlocked mutexes.
  new (g_run_storage) std::mutex;
  new (g_config_storage) std::mutex;
  g_pool = nullptr;
}

struct Init {
  Init() {
    new (g_run_storage) std::mutex;
    new (g_config_storage) std::mutex;
    platform::on_fork_in_child(after_fork_in_child);
  }
} g_init;

}  // namespace

int default_num_threads() {
  if (const char* env = std::getenv("DMLOPS_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1 && n <= 1024) return static_cast<int>(n);
  }
  return platform::usable_cpu_count();
}

int num_threads() {
  std::lock_guard lock(config_mutex());
  if (g_threads == 0) g_threads = default_num_threads();
  return g_threads;
}

void set_num_threads(int n) {
  if (n < 1) fail("set_num_threads: n is ", n, "; it must be >= 1");
  if (n > 1024) fail("set_num_threads: n is ", n, "; at most 1024 threads");
  if (t_inside_chunk) fail("set_num_threads: cannot be called from inside a parallel_for chunk");
  std::lock_guard run(run_mutex());  // wait for a running job
  std::lock_guard lock(config_mutex());
  g_threads = n;
  if (g_pool && g_pool->size() != n) {
    delete g_pool;
    g_pool = nullptr;
  }
}

void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain, const RangeFn& fn) {
  const std::int64_t length = end - begin;
  if (length <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  // floor(length / grain) chunks at most, so each has at least `grain` indices.
  const int threads = num_threads();
  if (threads == 1 || length / grain <= 1 || t_inside_chunk) return fn(begin, end);
  std::unique_lock run(run_mutex(), std::try_to_lock);
  if (!run.owns_lock()) return fn(begin, end);  // another caller has the pool: work inline
  ThreadPool* pool;
  {
    std::lock_guard lock(config_mutex());
    if (g_pool == nullptr) g_pool = new ThreadPool(g_threads);
    pool = g_pool;
  }
  pool->run(begin, end, std::min<std::int64_t>(length / grain, std::int64_t{kParallelChunksPerThread} * pool->size()), fn);
}

}  // namespace dmlops
