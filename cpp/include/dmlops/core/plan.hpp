// What an operator's plan() returns and DMLOPS_VERBOSE logs: the kernel path a call takes, why,
// on which instruction set, with which tiles and blocking, in how many tasks on how many threads.
// Each engine fills it from the very function that sets up its run (separable_gather's and
// separable_filter's plans, Lp pooling's kernel, unfold's and fold's task splits, convolution's
// algorithm list), so a plan cannot disagree with the call it describes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dmlops/core/dims.hpp"
#include "dmlops/core/dtype.hpp"
#include "dmlops/core/tensor.hpp"

namespace dmlops {

struct KernelPlan {
  std::string algorithm;  // the path, e.g. "gather", "filter", "sum_squares", "direct"
  std::string reason;     // why, in a few words
  std::string isa;        // kernel_isa() of the kernels it runs (core/cpu.hpp)
  std::string rewrite;    // convolution's geometry rewrite; "" elsewhere
  std::vector<std::pair<std::string, std::int64_t>> tiles;  // the tiles and blocking, in a fixed order
  std::int64_t tasks = 0;  // indices of its main parallel loop
  int threads = 0;         // num_threads() of the calling thread

  // A plan of `tasks` tasks on the calling thread's num_threads().
  static KernelPlan of(std::string algorithm, std::string reason, std::string isa, std::int64_t tasks);
  void tile(std::string name, std::int64_t value) { tiles.emplace_back(std::move(name), value); }
};

// DMLOPS_VERBOSE is set and not "0" (read once).
bool verbose();

// "f16", "f32", "i8", ...: the short dtype names of the log lines.
std::string_view short_name(DataType dtype);

// Writes "dmlops: <call> -> algorithm=... isa=... [rewrite=...] tiles=a:1,b:2 tasks=N threads=N
// reason=..." as one line on stderr (one write, so lines of concurrent calls do not interleave);
// `call` names the operator and its input, e.g. "padding1 1x3x8x8 f32".
void log_plan(const std::string& call, const KernelPlan& plan, std::string_view note = {});

// "1x3x8x8".
std::string dims_text(const Dims& sizes);

// A view of desc's sizes and strides (packed when it has none) that points nowhere: what a plan
// is computed on, for a call on arrays laid out as the descriptor says.
TensorView unbound_view(const TensorDesc& desc);

}  // namespace dmlops
