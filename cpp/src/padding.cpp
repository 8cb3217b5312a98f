#include "dmlops/ops/padding.hpp"

#include <vector>

#include "dmlops/core/error.hpp"
#include "dmlops/core/gather.hpp"
#include "dmlops/core/plan.hpp"

namespace dmlops {
namespace {

constexpr std::string_view kModeNames[] = {"constant", "edge", "reflection", "symmetric", "wrap"};

std::int64_t floor_mod(std::int64_t a, std::int64_t m) {
  const std::int64_t r = a % m;
  return r < 0 ? r + m : r;
}

void validate(const PaddingDesc& desc) {
  const char* op = desc.op_name.c_str();
  validate_tensor_desc(desc.input, (desc.op_name + ": input").c_str());
  const int rank = desc.input.sizes.size();
  const auto check_pads = [&](const Dims& pads, const char* field) {
    if (pads.size() != rank)
      fail(op, ": ", field, " has ", pads.size(), " entries but the input has ", rank, " dimensions");
    for (int d = 0; d < rank; ++d) {
      if (pads[d] < 0) fail(op, ": ", field, "[", d, "] is ", pads[d], "; paddings must be >= 0");
    }
  };
  check_pads(desc.start_padding, "start_padding");
  check_pads(desc.end_padding, "end_padding");
  if (static_cast<int>(desc.mode) >= static_cast<int>(std::size(kModeNames)))
    fail(op, ": padding_mode has the unknown value ", static_cast<int>(desc.mode));
  if (desc.value.dtype != desc.input.dtype)
    fail<DTypeError>(op, ": padding_value has dtype ", name(desc.value.dtype), " but the input is ",
                     name(desc.input.dtype), " (PaddingValueDataType must match the tensors)");
  // Sizes stay far below int64 overflow: no real tensor has 2^48 elements on one axis.
  constexpr std::int64_t kMaxSize = std::int64_t{1} << 48;
  for (int d = 0; d < rank; ++d) {
    const std::int64_t in = desc.input.sizes[d], start = desc.start_padding[d], end = desc.end_padding[d];
    if (in > kMaxSize || start > kMaxSize || end > kMaxSize || in + start + end > kMaxSize)
      fail(op, ": output size on dimension ", d, " (", in, " + ", start, " + ", end, ") exceeds 2^48");
  }
}

}  // namespace

std::string_view name(PaddingMode mode) { return kModeNames[static_cast<int>(mode)]; }

PaddingMode parse_padding_mode(std::string_view text) {
  for (std::size_t i = 0; i < std::size(kModeNames); ++i) {
    if (text == kModeNames[i]) return static_cast<PaddingMode>(i);
  }
  fail("unknown padding_mode '", text, "'; expected constant, edge, reflection, symmetric or wrap");
}

TensorDesc infer_output(const PaddingDesc& desc) {
  validate(desc);
  TensorDesc expected{desc.input.dtype, {}, std::nullopt};
  for (int d = 0; d < desc.input.sizes.size(); ++d)
    expected.sizes.push_back(desc.input.sizes[d] + desc.start_padding[d] + desc.end_padding[d]);
  return checked_output(expected, desc.output, desc.op_name + ": output",
                        " but input sizes + start_padding + end_padding = ");
}

std::int64_t padding_source_index(PaddingMode mode, std::int64_t o, std::int64_t n, std::int64_t start) {
  const std::int64_t i = o - start;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PaddingMode::Constant: return -1;
    case PaddingMode::Edge: return i < 0 ? 0 : n - 1;
    case PaddingMode::Reflection: {
      if (n == 1) return 0;  // Decision (spec §1): DirectML leaves n == 1 undefined
      const std::int64_t period = 2 * (n - 1), m = floor_mod(i, period);
      return m < n ? m : period - m;
    }
    case PaddingMode::Symmetric: {
      const std::int64_t period = 2 * n, m = floor_mod(i, period);
      return m < n ? m : period - 1 - m;
    }
    case PaddingMode::Wrap: return floor_mod(i, n);
  }
  return -1;
}

namespace {

// Per axis: the borders element by element (they fold back and forth), the interior as one copy
// run, so building the map costs the padding, not the whole axis.
std::vector<AxisMap> padding_maps(const PaddingDesc& desc, const TensorDesc& out_desc) {
  const int rank = desc.input.sizes.size();
  std::vector<AxisMap> maps(rank);
  for (int d = 0; d < rank; ++d) {
    const std::int64_t n = desc.input.sizes[d], start = desc.start_padding[d];
    if (start == 0 && desc.end_padding[d] == 0) continue;  // identity
    for (std::int64_t o = 0; o < start; ++o) maps[d].push(padding_source_index(desc.mode, o, n, start));
    maps[d].push_run(0, 1, n);
    for (std::int64_t o = start + n; o < out_desc.sizes[d]; ++o)
      maps[d].push(padding_source_index(desc.mode, o, n, start));
  }
  return maps;
}

}  // namespace

KernelPlan plan(const PaddingDesc& desc) {
  const TensorDesc out_desc = infer_output(desc);
  return describe_separable_gather(unbound_view(desc.input), unbound_view(out_desc), padding_maps(desc, out_desc));
}

void execute(const PaddingDesc& desc, const TensorView& in, const TensorView& out) {
  const TensorDesc out_desc = infer_output(desc);
  check_view_matches(in, desc.input, (desc.op_name + ": input").c_str());
  check_output_view(out, out_desc, (desc.op_name + ": out").c_str(), {&in});
  const std::vector<AxisMap> maps = padding_maps(desc, out_desc);
  if (verbose())
    log_plan(desc.op_name + " " + std::string(name(desc.mode)) + " " + dims_text(in.sizes) + " " +
                 std::string(short_name(in.dtype)),
             describe_separable_gather(in, out, maps));
  separable_gather(in, out, maps, desc.value);
}

}  // namespace dmlops
