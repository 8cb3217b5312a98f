#include "dmlops/core/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>

#include "dmlops/core/error.hpp"
#include "dmlops/core/platform.hpp"

namespace dmlops {
namespace {

// How long a thread polls before it blocks, when it waits for the next job (a worker) or for
// the last chunks (the caller). Waking a blocked thread costs tens of microseconds on virtual
// machines (the idle vCPU must be woken too), as long as a small kernel: a brief poll catches
// the next call of a loop, or the next parallel_for of the same operator, while awake. It is
// short so that a process sharing the CPUs (another library's threads, another program) gets
// them back soon.
constexpr auto kSpinTime = std::chrono::microseconds(100);

// Polls `ready` for up to kSpinTime; returns whether it became true. With more threads than
// CPUs (`crowded`), it yields now and then so that a polling thread does not hold back those
// with work. Otherwise it never yields: on Linux's EEVDF scheduler each sched_yield pushes the
// thread's deadline back a whole slice, so a worker that yields while it polls loses its CPU to
// a busy thread of another library or process for milliseconds, and misses the job it polls for.
template <class Ready>
bool spin_until(Ready ready, bool crowded) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (unsigned i = 1;; ++i) {
    if (ready()) return true;
    if (i % 16 == 0) {
      if (std::chrono::steady_clock::now() > deadline) return ready();
      if (crowded) std::this_thread::yield();
    } else {
      platform::cpu_relax();
    }
  }
}

// True on a thread while it runs a chunk: a nested parallel_for then runs inline.
thread_local bool t_inside_chunk = false;
// The calling thread's own count; 0: the process-wide one.
thread_local int t_local_threads = 0;

// Each thread of a job (the caller is thread 0, worker w is thread w + 1) starts on a range of
// chunks of its own, the same ones at every call of the same shape: what a thread wrote or read
// at the last call is still in its caches (as with OpenMP's static schedule; with one shared
// counter, who ran which chunk changed at every call, and at 16 threads data that fits the
// caches came from another core's). A thread that has run its own range takes chunks from the
// back of the others' ranges, so a descheduled or slower thread still holds back only the chunk
// it is running. A range's `left` word holds its job's id (high 32 bits) and its chunks not yet
// taken: claiming one is a compare-and-swap on it, which fails for a worker that wakes late
// (its job done, or replaced) rather than take a chunk of a job it did not read.
struct alignas(64) ChunkRange {
  std::atomic<std::uint64_t> left{0};
  std::atomic<std::int64_t> front{0}, back{0};  // the owner's next chunk; one past the thieves' next
};
std::uint64_t range_word(std::uint32_t job, std::int64_t chunks) { return (std::uint64_t{job} << 32) | static_cast<std::uint64_t>(chunks); }
std::uint32_t job_of(std::uint64_t word) { return static_cast<std::uint32_t>(word >> 32); }
std::uint32_t chunks_left(std::uint64_t word) { return static_cast<std::uint32_t>(word); }

class ThreadPool {
 public:
  ThreadPool() : slots_(new Slot[kMaxThreads]), ranges_(new ChunkRange[kMaxThreads]), cpus_(platform::usable_cpu_count()) {}

  // Held by the one caller that runs jobs on this pool.
  std::mutex& owner() { return owner_; }
  int workers() const { return workers_.load(std::memory_order_relaxed); }

  // Adds workers until there are n, or the OS refuses a thread (then this pool stops trying);
  // returns how many there are. Only the owner calls it.
  int grow(int n) {
    n = std::min(n, refused_at_);
    while (workers() < n) {
      const int index = workers();
      try {
        std::thread([this, index] { worker_loop(index); }).detach();
      } catch (const std::system_error&) {
        refused_at_ = index;
        break;
      }
      workers_.store(index + 1, std::memory_order_relaxed);
    }
    return workers();
  }

  // Runs fn over `chunks` parts of [begin, end) on the caller and `helpers` workers. Only the
  // owner calls it.
  void run(std::int64_t begin, std::int64_t end, int chunks, int helpers, const RangeFn& fn) {
    if (++job_ == 0) ++job_;  // 0: the signal a worker has before its first job
    fn_.store(&fn, std::memory_order_relaxed);
    begin_.store(begin, std::memory_order_relaxed);
    length_.store(end - begin, std::memory_order_relaxed);
    helpers_.store(helpers, std::memory_order_relaxed);
    chunks_.store(chunks, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    failed_.store(false, std::memory_order_relaxed);
    // A job with no more threads than CPUs runs best with each thread on a CPU of its own.
    caller_cpu_.store(crowded(helpers) ? -1 : platform::current_cpu(), std::memory_order_relaxed);
    error_ = nullptr;
    const int threads = helpers + 1;
    for (int t = 0; t < threads; ++t) open_[t].store(1, std::memory_order_relaxed);  // every range has chunks
    for (int t = 0; t < threads; ++t) {
      const std::int64_t front = std::int64_t{chunks} * t / threads, back = std::int64_t{chunks} * (t + 1) / threads;
      ranges_[t].front.store(front, std::memory_order_relaxed);
      ranges_[t].back.store(back, std::memory_order_relaxed);
      // Publishes the fields above and `open_` to every thread that claims a chunk of this job.
      ranges_[t].left.store(range_word(job_, back - front), std::memory_order_release);
    }
    wake_children(0, job_);
    run_chunks(job_, 0);
    std::uint32_t done = 0;
    const auto finished = [&] { return (done = done_.load(std::memory_order_acquire)) == static_cast<std::uint32_t>(chunks); };
    if (!spin_until(finished, crowded(helpers))) {
      while (!finished()) platform::wait_while_equal(done_, done);
    }
    fn_.store(nullptr, std::memory_order_relaxed);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // One cache line per worker: its wake-up word, the id of the last job it was asked to join.
  struct alignas(64) Slot {
    std::atomic<std::uint32_t> signal{0};
  };

  // The caller is node 0 of a binary tree and worker w is node w + 1: each node wakes its two
  // children, so waking 15 workers costs the caller two notifications, not 15.
  void wake_children(int node, std::uint32_t job) {
    const int helpers = helpers_.load(std::memory_order_relaxed);
    for (int child = 2 * node + 1; child <= 2 * node + 2; ++child) {
      const int worker = child - 1;
      if (worker >= helpers || worker >= workers()) return;
      slots_[worker].signal.store(job, std::memory_order_release);
      platform::wake_one(slots_[worker].signal);
    }
  }

  // More threads than CPUs: they cannot all run at once.
  bool crowded(int helpers) const { return helpers >= cpus_; }

  void worker_loop(int index) {
    std::atomic<std::uint32_t>& signal = slots_[index].signal;
    std::uint32_t seen = 0, job = 0;
    int kept_off = -1;  // the CPU this worker's affinity leaves out (its last caller's), or -1
    int handled = -1;   // the caller's CPU that kept_off was last set for
    bool crowded_job = true;  // the last job's; the thread starts with the kernel's default slices
    const auto asked = [&] { return (job = signal.load(std::memory_order_acquire)) != seen; };
    for (;;) {
      if (!spin_until(asked, crowded_job)) {
        while (!asked()) platform::wait_while_equal(signal, seen);
      }
      seen = job;
      wake_children(index + 1, job);
      // Short time slices let a worker in soon after it is woken, but with more threads than
      // CPUs they only make the workers preempt each other: asked for (a system call) only
      // when that changes.
      if (crowded(helpers_.load(std::memory_order_relaxed)) != crowded_job) {
        crowded_job = !crowded_job;
        platform::set_short_time_slices(!crowded_job);
      }
      // A worker on its caller's CPU only takes turns with it. The scheduler leaves it there
      // when another busy thread (of torch, of another process) makes the count of runnable
      // threads odd: it balances counts, not processes, so this call would get one CPU. And a
      // worker woken while its CPU's vCPU sleeps lands on its waker's CPU and preempts it. So
      // a worker keeps off its caller's CPU, and stays off it while it sleeps: a system call
      // only when the caller has moved (or the job is crowded: then no CPU is kept off). On
      // the 2-vCPU Zen 4, moved off after each wake, a 26 us call (2 threads) took 47-69 us
      // after an idle millisecond (two migrations a call); kept off, 0.84-0.98x that time
      // paired (25 migrations in 2,000 calls, from 3,958).
      const int caller_cpu = caller_cpu_.load(std::memory_order_relaxed);
      if (caller_cpu != handled) {  // (once per move, even where the CPU cannot be left out)
        kept_off = platform::keep_off_cpu(caller_cpu, kept_off);
        handled = caller_cpu;
      }
      run_chunks(job, index + 1);
      // With a CPU each, a worker that runs out of chunks waits for the last ones of its job
      // (or of a later job that does not ask it) before its poll starts, so that it polls
      // kSpinTime past the end of the call's work, not of its own share. Otherwise, at 16
      // threads, the workers that finished first (a third sooner than the last) blocked during
      // the call's last chunk and its return to Python, and the next call's first step had to
      // wake them (16-core Xeon: its padding step's last chunk started 20-110 us late, where a
      // chunk took 3-30 us). It polls its own wake-up word and `finished_`, which the job
      // writes once: polling words that every chunk claim or report writes (the caller's
      // range, the count of chunks done) made each such write wait for 15 copies to be
      // dropped (16-core Xeon: a step cost 1.2 us more).
      if (!crowded_job) {
        while (!asked() && !finished(seen)) platform::cpu_relax();
      }
    }
  }

  // Runs the chunks of `job` left in thread `self`'s range, then those left in the others'
  // (from their backs), until none is left (or another job has replaced it).
  void run_chunks(std::uint32_t job, int self) {
    t_inside_chunk = true;
    const int threads = helpers_.load(std::memory_order_relaxed) + 1;
    std::uint32_t ran = run_range(job, self, true);
    // Only the ranges that may have chunks left: reading every other range's word (each a
    // line its owner writes) cost a step 0.5-1.7 us at 16 threads on the 16-core Xeon. A range
    // whose flag is clear is empty; one whose flag is set may be empty by now, and is read.
    for (int k = 1; k < threads; ++k) {
      const int t = (self + k) % threads;
      if (open_[t].load(std::memory_order_relaxed) != 0) ran += run_range(job, t, false);
    }
    t_inside_chunk = false;
    // Counted once per thread, not per chunk: at 16 threads, chunks ending together queued on
    // this cache line. A thread reports once it finds nothing left to claim, so the count is
    // complete as soon as the last chunk has run.
    if (ran != 0 && done_.fetch_add(ran, std::memory_order_acq_rel) + ran == static_cast<std::uint32_t>(chunks_.load(std::memory_order_relaxed))) {
      // `finished_` only moves forward: the last thread of the previous job may store after
      // this job's (its caller saw the count complete first, and went on).
      std::uint32_t last = finished_.load(std::memory_order_relaxed);
      while (static_cast<std::int32_t>(job - last) > 0 &&
             !finished_.compare_exchange_weak(last, job, std::memory_order_release, std::memory_order_relaxed)) {
      }
      platform::wake_one(done_);
    }
  }

  // Claims and runs the chunks of `job` left in thread t's range: its owner from the front,
  // others from the back. Whoever claims the last one clears the range's flag in `open_`.
  std::uint32_t run_range(std::uint32_t job, int t, bool own) {
    ChunkRange& range = ranges_[t];
    std::uint32_t ran = 0;
    std::uint64_t left = range.left.load(std::memory_order_acquire);
    for (;;) {
      if (job_of(left) != job || chunks_left(left) == 0) break;
      if (!range.left.compare_exchange_weak(left, left - 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      // The chunk is ours, so its job is not finished and the fields below are still its own.
      // A plain store, not a read-modify-write of the shared line: with a chunk per thread
      // every thread clears its flag as it starts, and would wait its turn for the line.
      if (chunks_left(left) == 1) open_[t].store(0, std::memory_order_relaxed);
      const std::int64_t chunk = own ? range.front.fetch_add(1, std::memory_order_relaxed)
                                     : range.back.fetch_sub(1, std::memory_order_relaxed) - 1;
      run_chunk(chunk);
      ++ran;
      left = range.left.load(std::memory_order_acquire);
    }
    return ran;
  }

  // Whether every chunk of `job` has run (or been skipped): `finished_` is job or a later one.
  bool finished(std::uint32_t job) const {
    return static_cast<std::int32_t>(finished_.load(std::memory_order_acquire) - job) >= 0;
  }

  void run_chunk(std::int64_t chunk) {
    const std::int64_t chunks = chunks_.load(std::memory_order_relaxed);
    if (!failed_.load(std::memory_order_relaxed)) {
      const std::int64_t begin = begin_.load(std::memory_order_relaxed), length = length_.load(std::memory_order_relaxed);
      const std::int64_t part = length / chunks, rest = length % chunks;
      const std::int64_t first = begin + chunk * part + std::min(chunk, rest);
      try {
        (*fn_.load(std::memory_order_relaxed))(first, first + part + (chunk < rest ? 1 : 0));
      } catch (...) {
        std::lock_guard lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
        failed_.store(true, std::memory_order_relaxed);
      }
    }
  }

  std::unique_ptr<Slot[]> slots_;
  std::unique_ptr<ChunkRange[]> ranges_;  // per thread of the current job
  std::atomic<int> workers_{0};
  int refused_at_ = kMaxThreads;
  const int cpus_;  // usable when the pool was made
  std::mutex owner_;
  std::uint32_t job_ = 0;  // the owner's

  // The current job, written before its ranges publish it: atomics, so that a worker that
  // reads them late (its job over) reads a stale value, not a torn one; it then fails its claim.
  alignas(64) std::atomic<const RangeFn*> fn_{nullptr};
  std::atomic<std::int64_t> begin_{0}, length_{0};
  std::atomic<int> helpers_{0}, chunks_{0};
  std::atomic<int> caller_cpu_{-1};  // where the caller runs; -1: unknown, or more threads than CPUs
  std::atomic<bool> failed_{false};
  alignas(64) std::atomic<std::uint32_t> done_{0};
  // Per thread of the current job: whether its range may have chunks left (0: it has none).
  // Written only by the caller, before the job, and by whoever claims the range's last chunk.
  alignas(64) std::atomic<std::uint8_t> open_[kMaxThreads] = {};
  // The id of the last job whose chunks have all run; written once per job.
  alignas(64) std::atomic<std::uint32_t> finished_{0};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

// Process-wide state. The pools are never destroyed (their detached workers may still be
// polling at exit). The mutex lives in raw storage so that the fork handler can re-create it
// in the child, where a thread of the parent may have held it at the time of the fork.
constexpr int kMaxPools = 64;
alignas(std::mutex) unsigned char g_registry_storage[sizeof(std::mutex)];
ThreadPool* g_pools[kMaxPools] = {};
int g_pool_count = 0;
std::atomic<int> g_threads{0};  // 0: not chosen yet, use default_num_threads()

std::mutex& registry_mutex() { return *std::launder(reinterpret_cast<std::mutex*>(g_registry_storage)); }

void after_fork_in_child() {
  // The parent's workers do not exist here: forget its pools (leaking them: their owners'
  // mutexes may be held by threads that are gone) and start with an unlocked registry.
  new (g_registry_storage) std::mutex;
  std::fill(std::begin(g_pools), std::end(g_pools), nullptr);
  g_pool_count = 0;
}

struct Init {
  Init() {
    new (g_registry_storage) std::mutex;
    platform::on_fork_in_child(after_fork_in_child);
  }
} g_init;

// A free pool for a caller that wants `threads` threads, owned (locked) on return; nullptr
// when every pool is busy and another would put more threads than CPUs to work.
ThreadPool* acquire_pool(int threads) {
  std::lock_guard lock(registry_mutex());
  int running = 0;
  for (int i = 0; i < g_pool_count; ++i) {
    if (g_pools[i]->owner().try_lock()) return g_pools[i];
    running += g_pools[i]->workers() + 1;
  }
  const int capacity = std::max(platform::usable_cpu_count(), g_threads.load(std::memory_order_relaxed));
  if (g_pool_count == kMaxPools || (g_pool_count > 0 && running + threads > capacity)) return nullptr;
  ThreadPool* pool = new ThreadPool;
  pool->owner().lock();
  g_pools[g_pool_count++] = pool;
  return pool;
}

}  // namespace

std::optional<int> parse_num_threads(std::string_view text) {
  const auto blank = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  if (text.empty() || text.size() > 4) return std::nullopt;
  int n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    n = 10 * n + (c - '0');
  }
  if (n < 1 || n > kMaxThreads) return std::nullopt;
  return n;
}

int default_num_threads() {
  if (const char* env = std::getenv("DMLOPS_NUM_THREADS")) {
    if (const auto n = parse_num_threads(env)) return *n;
  }
  return platform::usable_cpu_count();
}

int global_num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    // Racing first calls compute the same default.
    n = default_num_threads();
    int unset = 0;
    g_threads.compare_exchange_strong(unset, n, std::memory_order_relaxed);
    n = g_threads.load(std::memory_order_relaxed);
  }
  return n;
}

int num_threads() { return t_local_threads != 0 ? t_local_threads : global_num_threads(); }

void set_num_threads(int n) {
  if (n < 1 || n > kMaxThreads) fail("set_num_threads: n is ", n, "; it must be from 1 to ", kMaxThreads);
  g_threads.store(n, std::memory_order_relaxed);
}

int set_local_num_threads(int n) {
  if (n < 0 || n > kMaxThreads) fail("threads: n is ", n, "; it must be from 1 to ", kMaxThreads);
  const int previous = t_local_threads;
  t_local_threads = n;
  return previous;
}

void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain, const RangeFn& fn) {
  const std::int64_t length = end - begin;
  if (length <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const int threads = num_threads();
  // floor(length / grain) chunks at most, so each has at least `grain` indices.
  const std::int64_t most = std::min<std::int64_t>(length / grain, std::int64_t{kParallelChunksPerThread} * threads);
  if (threads == 1 || most <= 1 || t_inside_chunk) return fn(begin, end);
  ThreadPool* pool = acquire_pool(threads);
  if (pool == nullptr) return fn(begin, end);
  std::unique_lock owner(pool->owner(), std::adopt_lock);
  // One thread per chunk at most: the caller, and the workers the pool has (or can make).
  const int wanted = static_cast<int>(std::min<std::int64_t>(threads, most)) - 1;
  const int helpers = std::min(wanted, pool->grow(wanted));
  if (helpers == 0) return fn(begin, end);
  const auto chunks = static_cast<int>(std::min<std::int64_t>(most, std::int64_t{kParallelChunksPerThread} * (helpers + 1)));
  pool->run(begin, end, chunks, helpers, fn);
}

}  // namespace dmlops
