// The parallel runtime: pools of std::threads and parallel_for over an index range.
//
// - parallel_for cuts [begin, end) into chunks of at least `grain` indices (the grain is the
//   kernel's cost model: a chunk must pay for waking a thread), at most a few per thread. The
//   caller and as many workers as there are chunks beyond its own each start on a range of
//   chunks of their own, the same at every call of the same shape (so each finds in its caches
//   what it touched at the last call), claiming them one by one (one compare-and-swap each);
//   then they take what is left of the others' ranges, so a thread that is descheduled, or runs
//   slower, holds back only the chunk it is running: the others finish its share.
// - The caller waits for the work, never for the workers: it returns once every chunk has run,
//   whether or not every worker it woke has even started. No mutex on the hot path; workers are
//   woken in a tree (each wakes two more), poll briefly for the next job, then block on a futex
//   (std::atomic::wait).
// - Sharing the CPU with other busy threads: workers ask for short time slices and never yield
//   while they poll, so the scheduler lets them in as soon as they are woken; and a worker that
//   finds itself on its caller's CPU moves to another (see platform.hpp). Right after a torch
//   call whose OpenMP workers still spin, or beside a busy process, a call then gets its fair
//   share of the CPUs instead of running on one.
// - Thread counts: num_threads() is the calling thread's count: its own (set_local_num_threads,
//   Python's `with dmlops.threads(n)`) if it set one, else the process-wide one
//   (set_num_threads, else DMLOPS_NUM_THREADS, else the CPUs this process may run on).
// - Concurrent callers each get a pool of their own while the threads of all pools fit the
//   usable CPUs (or the process-wide count, if larger); beyond that a call runs on its calling
//   thread alone. A parallel_for inside a chunk runs inline.
// - A thread the OS refuses to create (process or memory limits) is not an error: the pool runs
//   with the workers it has.
// - The first exception thrown by any chunk is rethrown on the caller once every chunk has run
//   or been skipped; chunks not yet started are skipped.
// - After fork() the child forgets the parent's pools and makes its own on first use.
// - Results never depend on how a range is cut: kernels split their outputs, never a sum.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

namespace dmlops {

// A job is cut into up to this many chunks per thread: enough that the others can take over
// the remaining chunks of a thread that is descheduled, few enough that claiming them costs
// nothing next to running them.
inline constexpr int kParallelChunksPerThread = 4;
inline constexpr int kMaxThreads = 1024;

// The calling thread's count (see above).
int num_threads();
// The process-wide count: 1 <= n <= kMaxThreads, else InvalidArgument. Takes effect at the
// next call; running calls keep the count they started with.
void set_num_threads(int n);
// The process-wide count (ignoring the calling thread's own).
int global_num_threads();
// The calling thread's own count (0: none, follow the process-wide one); returns the previous.
int set_local_num_threads(int n);
// DMLOPS_NUM_THREADS if set to a valid count, else the usable CPUs.
int default_num_threads();
// The one parser of DMLOPS_NUM_THREADS: a decimal integer from 1 to kMaxThreads, optionally
// surrounded by blanks (as Python's int() accepts it); nullopt for anything else.
std::optional<int> parse_num_threads(std::string_view text);

using RangeFn = std::function<void(std::int64_t begin, std::int64_t end)>;
void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain, const RangeFn& fn);

}  // namespace dmlops
