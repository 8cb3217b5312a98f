// One process-wide pool of std::threads and parallel_for over an index range.
//
// - The pool is created lazily at the first parallel_for that needs more than one thread.
// - Its size comes from set_num_threads(n), else DMLOPS_NUM_THREADS, else the CPUs this
//   process may run on (platform::usable_cpu_count).
// - parallel_for splits [begin, end) into chunks of at least `grain` indices (so small work
//   stays on the calling thread), a few per thread, which the threads, the caller included,
//   take in turn until none is left.
// - The first exception thrown by any chunk is rethrown on the caller once every chunk has
//   finished or been skipped; chunks not yet started are skipped.
// - Calls from several threads at once are safe: one of them gets the pool, the others run
//   their range inline on their own thread. A parallel_for inside a chunk runs inline.
// - After fork() the child drops the parent's pool and makes its own on first use.
// - Threads waiting for work poll for up to 200 microseconds before they block (see
//   kSpinTime in parallel.cpp): calls in a loop find the workers awake.
#pragma once

#include <cstdint>
#include <functional>

namespace dmlops {

// A job is cut into up to this many chunks per thread, taken from a shared counter: when a
// thread is descheduled (another process wants the CPU) or a chunk runs slower (its data was
// in another core's cache), the others take over its remaining chunks instead of waiting for
// it. More would only add calls. Results never depend on the cut: kernels split their output,
// never a reduction.
inline constexpr int kParallelChunksPerThread = 4;

int num_threads();
// n >= 1; throws InvalidArgument otherwise. Waits for a running parallel_for to finish.
void set_num_threads(int n);
// The default: DMLOPS_NUM_THREADS if set to a positive integer, else the usable CPUs.
int default_num_threads();

using RangeFn = std::function<void(std::int64_t begin, std::int64_t end)>;
void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain, const RangeFn& fn);

}  // namespace dmlops
