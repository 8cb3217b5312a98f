#include "dmlops/core/plan.hpp"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "dmlops/core/parallel.hpp"

namespace dmlops {

KernelPlan KernelPlan::of(std::string algorithm, std::string reason, std::string isa, std::int64_t tasks) {
  KernelPlan plan;
  plan.algorithm = std::move(algorithm);
  plan.reason = std::move(reason);
  plan.isa = std::move(isa);
  plan.tasks = tasks;
  plan.threads = num_threads();
  return plan;
}

bool verbose() {
  static const bool on = [] {
    const char* value = std::getenv("DMLOPS_VERBOSE");
    return value != nullptr && value[0] != '\0' && std::string_view(value) != "0";
  }();
  return on;
}

std::string_view short_name(DataType dtype) {
  switch (dtype) {
    case DataType::Float16: return "f16";
    case DataType::Float32: return "f32";
    case DataType::Float64: return "f64";
    case DataType::UInt8: return "u8";
    case DataType::UInt16: return "u16";
    case DataType::UInt32: return "u32";
    case DataType::UInt64: return "u64";
    case DataType::Int8: return "i8";
    case DataType::Int16: return "i16";
    case DataType::Int32: return "i32";
    case DataType::Int64: return "i64";
  }
  return "?";
}

std::string dims_text(const Dims& sizes) {
  std::string text;
  for (std::int64_t s : sizes) {
    if (!text.empty()) text += 'x';
    text += std::to_string(s);
  }
  return text;
}

void log_plan(const std::string& call, const KernelPlan& plan, std::string_view note) {
  std::string tiles;
  for (const auto& [tile, value] : plan.tiles) {
    if (!tiles.empty()) tiles += ',';
    tiles += tile + ":" + std::to_string(value);
  }
  std::string line = "dmlops: " + call + " -> algorithm=" + plan.algorithm;
  if (!note.empty()) (line += ' ') += note;  // not " " + string: GCC 12 warns there (-Wrestrict, PR 105651)
  line += " isa=" + plan.isa;
  if (!plan.rewrite.empty()) line += " rewrite=" + plan.rewrite;
  line += " tiles=" + tiles + " tasks=" + std::to_string(plan.tasks) + " threads=" + std::to_string(plan.threads) +
          " reason=" + plan.reason + "\n";
  std::fputs(line.c_str(), stderr);  // one call: lines of concurrent calls do not interleave
}

TensorView unbound_view(const TensorDesc& desc) {
  TensorView view{desc.dtype, desc.sizes, desc.strides ? *desc.strides : packed_strides(desc.sizes), nullptr};
  for (std::int64_t& stride : view.byte_strides) stride *= static_cast<std::int64_t>(element_size(desc.dtype));
  return view;
}

}  // namespace dmlops
