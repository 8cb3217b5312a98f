#include "dmlops/core/window.hpp"

#include <vector>

#include "dmlops/core/error.hpp"

namespace dmlops {

std::vector<WindowAxis> window_axes(const std::string& op, const char* window_field, const Dims& spatial_in,
                                    const WindowParams& params) {
  const int rank = spatial_in.size();
  const auto entry = [&](const Dims& values, const char* field, std::int64_t fallback, std::int64_t minimum,
                         int axis) -> std::int64_t {
    if (values.empty() && fallback >= 0) return fallback;
    if (values.size() != rank)
      fail(op, ": ", field, " has ", values.size(), " entries but there are ", rank, " spatial dimensions");
    if (values[axis] < minimum) fail(op, ": ", field, "[", axis, "] is ", values[axis], "; it must be >= ", minimum);
    if (values[axis] > (std::int64_t{1} << 40)) fail(op, ": ", field, "[", axis, "] is ", values[axis], "; too large");
    return values[axis];
  };
  std::vector<WindowAxis> axes(rank);
  for (int a = 0; a < rank; ++a) {
    WindowAxis& w = axes[a];
    w.in = spatial_in[a];
    w.window = entry(params.window, window_field, -1, 1, a);
    w.stride = entry(params.strides, "strides", 1, 1, a);
    w.dilation = entry(params.dilations, "dilations", 1, 1, a);
    w.start = entry(params.start_padding, "start_padding", 0, 0, a);
    w.end = entry(params.end_padding, "end_padding", 0, 0, a);
    if (w.in + w.start + w.end < w.extent())
      fail(op, ": on spatial dimension ", a, " the window extent ", w.extent(), " (", window_field, " ", w.window,
           ", dilation ", w.dilation, ") is larger than the padded input ", w.in + w.start + w.end);
  }
  return axes;
}

}  // namespace dmlops
