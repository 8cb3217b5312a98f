// Convolution: descriptor validation, the geometry, and the names of modes and directions.
#include "geometry.hpp"

#include "dmlops/core/checked.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/window.hpp"

namespace dmlops {
namespace {

constexpr std::string_view kModeNames[] = {"convolution", "cross_correlation"};
constexpr std::string_view kDirectionNames[] = {"forward", "backward"};

}  // namespace

namespace conv {
namespace {

// One of the five per-dimension arrays: D entries (or none: the default), each >= minimum.
Dims axis_array(const Dims& values, const char* field, int D, std::int64_t fallback, std::int64_t minimum) {
  if (values.empty()) return Dims::filled(D, fallback);
  if (values.size() != D)
    fail(kOp, ": ", field, " has ", values.size(), " entries but there are ", D, " spatial dimensions");
  for (int a = 0; a < D; ++a) {
    if (values[a] < minimum) fail(kOp, ": ", field, "[", a, "] is ", values[a], "; it must be >= ", minimum);
    if (values[a] > (std::int64_t{1} << 40)) fail(kOp, ": ", field, "[", a, "] is ", values[a], "; too large");
  }
  return values;
}


}  // namespace

Geometry analyse(const ConvolutionDesc& desc) {
  validate_tensor_desc(desc.input, "Convolution: input");
  validate_tensor_desc(desc.filter, "Convolution: filter");
  const DataType dtype = desc.input.dtype;
  if (!is_floating(dtype))
    fail<DTypeError>(kOp, ": input has dtype ", name(dtype), "; convolution supports float16, float32 and float64");
  const int rank = desc.input.sizes.size();
  if (rank < 3 || rank > 5)
    fail(kOp, ": input has ", rank, " dimensions; it must have 3, 4 or 5: (N, C, spatial...) with 1 to 3 spatial "
         "dimensions");
  const auto same_kind = [&](const TensorDesc& t, const char* what) {
    if (t.dtype != dtype)
      fail<DTypeError>(kOp, ": ", what, " has dtype ", name(t.dtype), " but the input is ", name(dtype));
    if (t.sizes.size() != rank)
      fail(kOp, ": ", what, " has ", t.sizes.size(), " dimensions but the input has ", rank);
  };
  same_kind(desc.filter, "filter");
  if (desc.bias) {
    validate_tensor_desc(*desc.bias, "Convolution: bias");
    same_kind(*desc.bias, "bias");
  }
  if (desc.output) {
    validate_tensor_desc(*desc.output, "Convolution: output");
    same_kind(*desc.output, "output");
  }
  if (static_cast<std::size_t>(desc.mode) >= std::size(kModeNames))
    fail(kOp, ": mode has the unknown value ", static_cast<int>(desc.mode));
  if (static_cast<std::size_t>(desc.direction) >= std::size(kDirectionNames))
    fail(kOp, ": direction has the unknown value ", static_cast<int>(desc.direction));

  Geometry g;
  g.dtype = dtype;
  g.direction = desc.direction;
  g.D = rank - 2;
  g.strides = axis_array(desc.strides, "strides", g.D, 1, 1);
  g.dilations = axis_array(desc.dilations, "dilations", g.D, 1, 1);
  g.start = axis_array(desc.start_padding, "start_padding", g.D, 0, 0);
  g.end = axis_array(desc.end_padding, "end_padding", g.D, 0, 0);
  g.output_padding = axis_array(desc.output_padding, "output_padding", g.D, 0, 0);
  g.groups = desc.group_count;
  if (g.groups < 1) fail(kOp, ": group_count is ", g.groups, "; it must be >= 1");
  g.batch = desc.input.sizes[0];
  g.in_channels = desc.input.sizes[1];
  g.in_spatial = spatial(desc.input.sizes);
  g.kernel = spatial(desc.filter.sizes);
  if (g.in_channels % g.groups != 0)
    fail(kOp, ": the input has ", g.in_channels, " channels, which group_count ", g.groups, " does not divide");
  g.in_per_group = g.in_channels / g.groups;
  const bool forward = desc.direction == ConvolutionDirection::Forward;
  if (forward) {
    if (desc.filter.sizes[1] != g.in_per_group)
      fail(kOp, ": filter sizes[1] is ", desc.filter.sizes[1], " but a forward filter has input channels / group_count = ",
           g.in_channels, " / ", g.groups, " = ", g.in_per_group, " there: (OutC, InC/G, K...)");
    g.out_channels = desc.filter.sizes[0];
    if (g.out_channels % g.groups != 0)
      fail(kOp, ": the filter has ", g.out_channels, " output channels (sizes[0]), which group_count ", g.groups,
           " does not divide");
    for (int a = 0; a < g.D; ++a) {
      if (g.output_padding[a] != 0)
        fail(kOp, ": output_padding[", a, "] is ", g.output_padding[a], "; it must be 0 in the forward direction");
    }
    const std::vector<WindowAxis> axes =
        window_axes(kOp, "filter size", g.in_spatial, WindowParams{g.kernel, g.strides, g.dilations, g.start, g.end});
    for (const WindowAxis& axis : axes) {
      g.out_spatial.push_back(axis.out());
      g.extent.push_back(axis.extent());
    }
  } else {
    if (desc.filter.sizes[0] != g.in_channels)
      fail(kOp, ": filter sizes[0] is ", desc.filter.sizes[0], " but a backward filter has one entry per input channel (",
           g.in_channels, ") there: (InC, OutC/G, K...)");
    g.out_channels = checked_mul(desc.filter.sizes[1], g.groups, kOp, ": the output channel count (filter sizes[1] * group_count)");
    for (int a = 0; a < g.D; ++a) {
      // (in - 1) * stride + extent - start - end + output_padding; the backward walker computes
      // (in - 1) * stride + extent - start as well, so the whole sum is checked term by term.
      g.extent.push_back(checked_extent(g.kernel[a], g.dilations[a], kOp, ": on spatial dimension ", a,
                                        " the window extent (filter size - 1) * dilation + 1"));
      std::int64_t nominal = checked_mul(g.in_spatial[a] - 1, g.strides[a], kOp, ": on spatial dimension ", a,
                                         " the nominal backward output size ((input - 1) * stride)");
      nominal = checked_add(nominal, g.extent[a], kOp, ": on spatial dimension ", a,
                            " the nominal backward output size ((input - 1) * stride + extent)");
      nominal = checked_add(nominal, g.output_padding[a] - g.start[a] - g.end[a], kOp, ": on spatial dimension ", a,
                            " the nominal backward output size");
      if (desc.output) {
        g.out_spatial.push_back(desc.output->sizes[2 + a]);
      } else {
        if (nominal < 1)
          fail(kOp, ": the nominal backward output size on spatial dimension ", a, " is ", nominal,
               " (paddings larger than the transposed window); give the output sizes");
        g.out_spatial.push_back(nominal);
      }
    }
  }
  g.out_per_group = g.out_channels / g.groups;
  g.output = TensorDesc{dtype, {g.batch, g.out_channels}, std::nullopt};
  for (std::int64_t s : g.out_spatial) g.output.sizes.push_back(s);
  std::int64_t elements = checked_mul(g.batch, g.out_channels, kOp, ": the output's element count");
  for (std::int64_t s : g.out_spatial) elements = checked_mul(elements, s, kOp, ": the output's element count");
  validate_tensor_desc(g.output, "Convolution: output");
  if (desc.bias) {
    Dims expected = Dims::filled(rank, 1);
    expected[1] = g.out_channels;
    if (desc.bias->sizes != expected)
      fail(kOp, ": bias has sizes ", desc.bias->sizes, " but it must be ", expected, ": (1, OutC, 1...)");
  }
  if (desc.output) {
    if (forward && desc.output->sizes != g.output.sizes)
      fail(kOp, ": output has sizes ", desc.output->sizes, " but the convolution gives ", g.output.sizes);
    if (!forward && (desc.output->sizes[0] != g.batch || desc.output->sizes[1] != g.out_channels))
      fail(kOp, ": output has sizes ", desc.output->sizes, " but a backward convolution gives (", g.batch, ", ",
           g.out_channels, ", ...) (filter sizes[1] * group_count output channels)");
    g.output = *desc.output;
  }
  if (desc.fused_activation) validate_activation(kOp, *desc.fused_activation);
  return g;
}

}  // namespace conv

std::string_view name(ConvolutionMode mode) { return kModeNames[static_cast<int>(mode)]; }
std::string_view name(ConvolutionDirection direction) { return kDirectionNames[static_cast<int>(direction)]; }

ConvolutionMode parse_convolution_mode(std::string_view text) {
  for (std::size_t i = 0; i < std::size(kModeNames); ++i) {
    if (text == kModeNames[i]) return static_cast<ConvolutionMode>(i);
  }
  fail(conv::kOp, ": mode '", text, "' is unknown; expected one of cross_correlation, convolution");
}

ConvolutionDirection parse_convolution_direction(std::string_view text) {
  for (std::size_t i = 0; i < std::size(kDirectionNames); ++i) {
    if (text == kDirectionNames[i]) return static_cast<ConvolutionDirection>(i);
  }
  fail(conv::kOp, ": direction '", text, "' is unknown; expected one of forward, backward");
}

TensorDesc infer_output(const ConvolutionDesc& desc) { return conv::analyse(desc).output; }

}  // namespace dmlops
