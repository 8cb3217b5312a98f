#include "dmlops/ops/resample.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <memory>

#include "dmlops/core/error.hpp"
#include "dmlops/core/filter.hpp"
#include "dmlops/core/gather.hpp"
#include "dmlops/core/plan.hpp"
#include "dmlops/core/recent.hpp"

namespace dmlops {
namespace {

constexpr std::string_view kModeNames[] = {"nearest_neighbor", "linear"};
constexpr std::string_view kDirectionNames[] = {"increasing", "decreasing"};
// Sizes stay far below int64 overflow: no real tensor has 2^48 elements on one axis.
constexpr std::int64_t kMaxSize = std::int64_t{1} << 48;

// How nearest_neighbor turns a fractional input coordinate into an index.
enum class Rounding { HalfUp, Floor, Ceil };

// One axis of a resampling: sizes, and the coordinate transform in float64.
struct Axis {
  std::int64_t in = 1, out = 1;
  double scale = 1.0, input_offset = 0.5, output_offset = -0.5;

  double input_coordinate(std::int64_t o) const {
    return (static_cast<double>(o) - output_offset) / scale - input_offset;
  }
  double clamp(double x) const { return std::min(std::max(x, 0.0), static_cast<double>(in - 1)); }
  bool operator==(const Axis&) const = default;
};

// The input index output o reads; the identity map when that is every o.
AxisMap nearest_map(const Axis& axis, Rounding rounding) {
  std::vector<std::int64_t> map(static_cast<std::size_t>(axis.out));
  bool identity = axis.in == axis.out;
  for (std::int64_t o = 0; o < axis.out; ++o) {
    const double x = axis.input_coordinate(o);
    const double rounded = rounding == Rounding::HalfUp ? std::floor(x + 0.5)
                           : rounding == Rounding::Floor ? std::floor(x)
                                                         : std::ceil(x);
    map[static_cast<std::size_t>(o)] = static_cast<std::int64_t>(axis.clamp(rounded));
    identity = identity && map[static_cast<std::size_t>(o)] == o;
  }
  return identity ? AxisMap{} : AxisMap::from_indices(map);
}

// Linear taps of output o: the clamped coordinate c = clamp(x, 0, in-1) between i0 = floor(c)
// and i0 + 1 with weights 1 - w and w (w = c - i0). A tap of weight 0 is left out, so a pixel
// sampled exactly is returned as it is even when its neighbour is infinite (inf * 0 = nan).
void push_linear(AxisFilter& filter, const Axis& axis, std::int64_t o) {
  const double c = axis.clamp(axis.input_coordinate(o));
  const double i0 = std::floor(c), w = c - i0;
  if (w == 0.0) filter.push(static_cast<std::int64_t>(i0), {1.0});
  else filter.push(static_cast<std::int64_t>(i0), {1.0 - w, w});
}

// Sum of the triangle's weights 1 - |i - x| * scale over the integers i in [a, b] (all within its
// support, so no term is negative), in closed form: n terms on one side of the peak sum to n times
// the weight at their middle. The work does not grow with the support 1/scale.
double triangle_sum(double a, double b, double x, double scale) {
  const auto side = [&](double lo, double hi) {
    return lo > hi ? 0.0 : (hi - lo + 1.0) * (1.0 - std::fabs(x - (lo + hi) / 2.0) * scale);
  };
  const double peak = std::floor(x);
  return side(a, std::min(b, peak)) + side(std::max(a, peak + 1.0), b);
}

// Antialiased taps (ONNX Resize antialias=1, exclude_outside=0) of output o when scale < 1:
// the triangle 1 - |i - x| * scale of half-width 1/scale around the unclamped coordinate x,
// normalised to sum 1; taps outside the input read the edge element, so their weights are
// added to the edge tap's. Those are summed in closed form: the loop is bounded by the input.
void push_antialiased(AxisFilter& filter, const Axis& axis, std::int64_t o, std::vector<double>& weights) {
  const double x = axis.input_coordinate(o), support = 1.0 / axis.scale;
  const double lo = std::ceil(x - support), hi = std::floor(x + support), last = static_cast<double>(axis.in - 1);
  double total = 0.0;
  std::int64_t first = -1;
  weights.clear();
  const auto add = [&](std::int64_t index, double w) {
    if (w <= 0.0) return;
    total += w;
    if (first < 0) first = index;
    if (index - first == static_cast<std::int64_t>(weights.size())) weights.push_back(w);
    else weights.back() += w;  // clamped onto the edge tap
  };
  add(0, triangle_sum(lo, std::min(hi, -1.0), x, axis.scale));
  for (double i = std::max(lo, 0.0); i <= std::min(hi, last); i += 1.0)
    add(static_cast<std::int64_t>(i), 1.0 - std::fabs(i - x) * axis.scale);
  add(axis.in - 1, triangle_sum(std::max(lo, last + 1.0), hi, x, axis.scale));
  for (double& w : weights) w /= total;
  filter.push(first, weights);
}

AxisFilter linear_filter(const Axis& axis, bool antialiased) {
  AxisFilter filter;
  std::vector<double> weights;
  bool identity = axis.in == axis.out;
  for (std::int64_t o = 0; o < axis.out; ++o) {
    if (antialiased && axis.scale < 1.0) push_antialiased(filter, axis, o, weights);
    else push_linear(filter, axis, o);
    identity = identity && filter.first.back() == o && filter.taps(o) == 1;
  }
  return identity ? AxisFilter{} : filter;
}

void check_dtype_for_mode(const std::string& op, DataType dtype, InterpolationMode mode) {
  if (mode == InterpolationMode::Linear && !is_floating(dtype))
    fail<DTypeError>(op, ": linear interpolation needs float16, float32 or float64, not ", name(dtype),
                     "; integer tensors can be resampled with nearest_neighbor");
}

void check_output(const std::string& op, const TensorDesc& input, const TensorDesc& output) {
  const std::string what = op + ": output";
  validate_tensor_desc(output, what.c_str());
  if (output.dtype != input.dtype)
    fail<DTypeError>(what, " has dtype ", name(output.dtype), " but the input is ", name(input.dtype));
  if (output.sizes.size() != input.sizes.size())
    fail(what, " has ", output.sizes.size(), " dimensions but the input has ", input.sizes.size());
  for (int d = 0; d < output.sizes.size(); ++d) {
    if (output.sizes[d] > kMaxSize) fail(what, " size ", output.sizes[d], " on dimension ", d, " exceeds 2^48");
  }
}

// The per-axis parameters of a ResampleDesc (validated).
std::vector<Axis> resample_axes(const ResampleDesc& desc, const Dims& out_sizes) {
  const int rank = desc.input.sizes.size();
  std::vector<Axis> axes(static_cast<std::size_t>(rank));
  for (int d = 0; d < rank; ++d) {
    Axis& a = axes[static_cast<std::size_t>(d)];
    a.in = desc.input.sizes[d];
    a.out = out_sizes[d];
    a.scale = desc.scales[static_cast<std::size_t>(d)];
    if (!desc.input_pixel_offsets.empty()) a.input_offset = desc.input_pixel_offsets[static_cast<std::size_t>(d)];
    if (!desc.output_pixel_offsets.empty()) a.output_offset = desc.output_pixel_offsets[static_cast<std::size_t>(d)];
  }
  return axes;
}

void validate(const ResampleDesc& desc) {
  const std::string& op = desc.op_name;
  validate_tensor_desc(desc.input, (op + ": input").c_str());
  const int rank = desc.input.sizes.size();
  if (static_cast<int>(desc.mode) >= static_cast<int>(std::size(kModeNames)))
    fail(op, ": interpolation_mode has the unknown value ", static_cast<int>(desc.mode));
  if (desc.rounding_direction && static_cast<int>(*desc.rounding_direction) >= static_cast<int>(std::size(kDirectionNames)))
    fail(op, ": rounding_direction has the unknown value ", static_cast<int>(*desc.rounding_direction));
  for (std::size_t i = 0; i < desc.pass_order.size(); ++i) {
    const std::int64_t a = desc.pass_order[i];
    if (a < 0 || a >= rank) fail(op, ": pass_order[", i, "] is ", a, "; it must name a dimension, 0 to ", rank - 1);
    if (std::find(desc.pass_order.begin(), desc.pass_order.begin() + static_cast<std::ptrdiff_t>(i), a) !=
        desc.pass_order.begin() + static_cast<std::ptrdiff_t>(i))
      fail(op, ": pass_order names dimension ", a, " twice");
  }
  const auto check_floats = [&](const std::vector<float>& values, const char* field, bool positive, bool optional) {
    if (optional && values.empty()) return;
    if (static_cast<int>(values.size()) != rank)
      fail(op, ": ", field, " has ", values.size(), " entries but the input has ", rank, " dimensions");
    for (int d = 0; d < rank; ++d) {
      const float v = values[static_cast<std::size_t>(d)];
      if (!std::isfinite(v)) fail(op, ": ", field, "[", d, "] is ", v, "; it must be a finite FLOAT");
      if (positive && !(v > 0.0f)) fail(op, ": ", field, "[", d, "] is ", v, "; scales must be > 0");
    }
  };
  check_floats(desc.scales, "scales", true, false);
  check_floats(desc.input_pixel_offsets, "input_pixel_offsets", false, true);
  check_floats(desc.output_pixel_offsets, "output_pixel_offsets", false, true);
  check_dtype_for_mode(op, desc.input.dtype, desc.mode);
}

// The per-axis tables of a call, built once: nearest_neighbor's index maps (one separable_gather)
// or linear's weight tables (one separable_filter).
struct Tables {
  InterpolationMode mode;
  std::vector<AxisMap> maps;
  std::vector<AxisFilter> filters;
  std::vector<int> order;  // linear's pass order; empty: the cheapest

  Tables(const std::vector<Axis>& axes, InterpolationMode mode, Rounding rounding, bool antialiased,
         const std::vector<std::int64_t>& pass_order = {})
      : mode(mode), order(pass_order.begin(), pass_order.end()) {  // validated: dimensions, so ints
    for (const Axis& a : axes) {
      if (mode == InterpolationMode::NearestNeighbor) maps.push_back(nearest_map(a, rounding));
      else filters.push_back(linear_filter(a, antialiased));
    }
  }
  KernelPlan describe(const TensorView& in, const TensorView& out) const {
    return mode == InterpolationMode::NearestNeighbor ? describe_separable_gather(in, out, maps)
                                                      : describe_separable_filter(in, out, filters, order);
  }
  void run(const TensorView& in, const TensorView& out) const {
    if (mode == InterpolationMode::NearestNeighbor) separable_gather(in, out, maps, Scalar{in.dtype, 0});
    else separable_filter(in, out, filters, order);
  }
};

// The tables of a call, taken from this thread's last few calls when one was built from the same
// axes and options: a loop over frames of one shape builds them once. Built per call, they are
// serial work as long as the data movement itself at many threads: a uint8 upsampling of
// 360x640 by 3 spent 20 us of a 2-core Xeon's time on its index maps (1080 + 1920 coordinates
// turned into runs), where 16 threads of a 16-core Xeon moved its 6 MB in 87 us.
std::shared_ptr<const Tables> tables_for(std::vector<Axis> axes, InterpolationMode mode, Rounding rounding,
                                         bool antialiased, const std::vector<std::int64_t>& pass_order = {}) {
  struct Key {
    std::vector<Axis> axes;
    InterpolationMode mode;
    Rounding rounding;
    bool antialiased;
    std::vector<std::int64_t> pass_order;
  };
  thread_local RecentValues<Key, Tables> recent;
  std::int64_t positions = 0;
  for (const Axis& a : axes) positions += a.out;
  return recent.get(
      [&](const Key& k) {
        return k.mode == mode && k.rounding == rounding && k.antialiased == antialiased && k.axes == axes &&
               k.pass_order == pass_order;
      },
      [&] { return std::make_shared<const Tables>(axes, mode, rounding, antialiased, pass_order); }, positions,
      [&] { return Key{std::move(axes), mode, rounding, antialiased, pass_order}; });
}

// Logs the call's plan when DMLOPS_VERBOSE asks, then runs it.
void run(const std::string& op, const Tables& tables, const TensorView& in, const TensorView& out) {
  if (verbose())
    log_plan(op + " " + std::string(name(tables.mode)) + " " + dims_text(in.sizes) + " " +
                 std::string(short_name(in.dtype)) + " to " + dims_text(out.sizes),
             tables.describe(in, out));
  tables.run(in, out);
}

Rounding rounding_of(const ResampleDesc& desc) {
  return !desc.rounding_direction                                        ? Rounding::HalfUp
         : *desc.rounding_direction == AxisDirection::Decreasing ? Rounding::Floor
                                                                  : Rounding::Ceil;
}

// Upsample2D's axes: scale 1 (the identity) on N, C and D, the integer scales on H and W.
std::vector<Axis> upsample_axes(const Upsample2DDesc& desc) {
  const int rank = desc.input.sizes.size();
  std::vector<Axis> axes(static_cast<std::size_t>(rank));
  for (int d = 0; d < rank; ++d) {
    Axis& a = axes[static_cast<std::size_t>(d)];
    a.in = desc.input.sizes[d];
    a.scale = d == rank - 2 ? static_cast<double>(desc.scale_height) : d == rank - 1 ? static_cast<double>(desc.scale_width) : 1.0;
    a.out = a.in * static_cast<std::int64_t>(a.scale);
  }
  return axes;
}

}  // namespace

std::string_view name(InterpolationMode mode) { return kModeNames[static_cast<int>(mode)]; }
std::string_view name(AxisDirection direction) { return kDirectionNames[static_cast<int>(direction)]; }

InterpolationMode parse_interpolation_mode(std::string_view text) {
  for (std::size_t i = 0; i < std::size(kModeNames); ++i) {
    if (text == kModeNames[i]) return static_cast<InterpolationMode>(i);
  }
  fail("unknown interpolation_mode '", text, "'; expected nearest_neighbor or linear");
}

AxisDirection parse_axis_direction(std::string_view text) {
  for (std::size_t i = 0; i < std::size(kDirectionNames); ++i) {
    if (text == kDirectionNames[i]) return static_cast<AxisDirection>(i);
  }
  fail("unknown rounding_direction '", text, "'; expected increasing or decreasing");
}

std::int64_t resample_output_size(const std::string& op, int axis, std::int64_t in, double scale) {
  const double product = static_cast<double>(in) * scale;
  const double nearest = std::nearbyint(product);
  const double size = std::fabs(product - nearest) <= nearest * 0x1p-24 ? nearest : std::floor(product);
  if (size < 1.0)
    fail(op, ": the output size on dimension ", axis, " is floor(", in, " x ", scale,
         ") = 0; give the output sizes explicitly");
  if (size > static_cast<double>(kMaxSize))
    fail(op, ": the output size on dimension ", axis, " (", in, " x ", scale, ") exceeds 2^48");
  return static_cast<std::int64_t>(size);
}

TensorDesc infer_output(const ResampleDesc& desc) {
  validate(desc);
  if (desc.output) {
    check_output(desc.op_name, desc.input, *desc.output);
    return *desc.output;
  }
  TensorDesc out{desc.input.dtype, {}, std::nullopt};
  for (int d = 0; d < desc.input.sizes.size(); ++d)
    out.sizes.push_back(resample_output_size(desc.op_name, d, desc.input.sizes[d], desc.scales[static_cast<std::size_t>(d)]));
  validate_tensor_desc(out, (desc.op_name + ": output").c_str());
  return out;
}

TensorDesc infer_output(const Upsample2DDesc& desc) {
  const std::string op = "Upsample2D";
  validate_tensor_desc(desc.input, "Upsample2D: input");
  const int rank = desc.input.sizes.size();
  if (rank != 4 && rank != 5)
    fail(op, ": input has ", rank, " dimensions; Upsample2D takes 4 (N, C, H, W) or 5 (N, C, D, H, W)");
  if (static_cast<int>(desc.mode) >= static_cast<int>(std::size(kModeNames)))
    fail(op, ": interpolation_mode has the unknown value ", static_cast<int>(desc.mode));
  const auto check_scale = [&](std::int64_t scale, const char* field, std::int64_t size) {
    if (scale < 1) fail(op, ": scale_size ", field, " is ", scale, "; scales must be integers >= 1");
    if (scale > kMaxSize / size) fail(op, ": the output ", field, " ", size, " x ", scale, " exceeds 2^48");
  };
  check_scale(desc.scale_height, "height", desc.input.sizes[rank - 2]);
  check_scale(desc.scale_width, "width", desc.input.sizes[rank - 1]);
  check_dtype_for_mode(op, desc.input.dtype, desc.mode);
  TensorDesc expected{desc.input.dtype, {}, std::nullopt};
  for (const Axis& a : upsample_axes(desc)) expected.sizes.push_back(a.out);
  validate_tensor_desc(expected, "Upsample2D: output");
  if (!desc.output) return expected;
  check_output(op, desc.input, *desc.output);
  if (desc.output->sizes != expected.sizes)
    fail(op, ": output has sizes ", desc.output->sizes, " but the input sizes x scale_size are ", expected.sizes);
  return *desc.output;
}

void execute(const ResampleDesc& desc, const TensorView& in, const TensorView& out) {
  const TensorDesc out_desc = infer_output(desc);
  check_view_matches(in, desc.input, (desc.op_name + ": input").c_str());
  check_output_view(out, out_desc, (desc.op_name + ": out").c_str(), {&in});
  run(desc.op_name, *tables_for(resample_axes(desc, out_desc.sizes), desc.mode, rounding_of(desc), desc.antialiased, desc.pass_order),
      in, out);
}

void execute(const Upsample2DDesc& desc, const TensorView& in, const TensorView& out) {
  const TensorDesc out_desc = infer_output(desc);
  check_view_matches(in, desc.input, "Upsample2D: input");
  check_output_view(out, out_desc, "Upsample2D: out", {&in});
  run("Upsample2D", *tables_for(upsample_axes(desc), desc.mode, Rounding::HalfUp, /*antialiased=*/false), in, out);
}

KernelPlan plan(const ResampleDesc& desc) {
  const TensorDesc out_desc = infer_output(desc);
  return tables_for(resample_axes(desc, out_desc.sizes), desc.mode, rounding_of(desc), desc.antialiased, desc.pass_order)
      ->describe(unbound_view(desc.input), unbound_view(out_desc));
}

KernelPlan plan(const Upsample2DDesc& desc) {
  const TensorDesc out_desc = infer_output(desc);
  return tables_for(upsample_axes(desc), desc.mode, Rounding::HalfUp, /*antialiased=*/false)
      ->describe(unbound_view(desc.input), unbound_view(out_desc));
}

}  // namespace dmlops
