// dmlops._core resampling functions (Upsample2D and the Resample family). The Python face
// (python/dmlops/resample.py) normalises the arguments; this file turns them into descriptors
// and runs them with the GIL released.
#include "dmlops/ops/resample.hpp"

#include "convert.hpp"

namespace dmlops::bindings {
namespace {

// None -> absent (RESAMPLE1 rounding, default offsets).
ResampleDesc make_resample(const std::string& op, const TensorDesc& input, const std::string& mode,
                           const py::object& rounding, const py::object& scales, const py::object& input_offsets,
                           const py::object& output_offsets, bool antialiased) {
  ResampleDesc desc;
  desc.op_name = op;
  desc.input = input;
  desc.mode = parse_interpolation_mode(mode);
  if (!rounding.is_none()) desc.rounding_direction = parse_axis_direction(rounding.cast<std::string>());
  desc.scales = floats_of(scales, op + ": scales");
  if (!input_offsets.is_none()) desc.input_pixel_offsets = floats_of(input_offsets, op + ": input_pixel_offsets");
  if (!output_offsets.is_none()) desc.output_pixel_offsets = floats_of(output_offsets, op + ": output_pixel_offsets");
  desc.antialiased = antialiased;
  return desc;
}

Upsample2DDesc make_upsample(const TensorDesc& input, const py::object& scale_size, const std::string& mode) {
  const Dims scale = dims_of(scale_size, "Upsample2D: scale_size");
  if (scale.size() != 2) fail("Upsample2D: scale_size has ", scale.size(), " entries; it is (height, width)");
  Upsample2DDesc desc;
  desc.input = input;
  desc.scale_height = scale[0];
  desc.scale_width = scale[1];
  desc.mode = parse_interpolation_mode(mode);
  return desc;
}

py::list to_list(const std::vector<float>& values) {
  py::list list;
  for (float v : values) list.append(static_cast<double>(v));
  return list;
}

// The descriptors of Python descriptors' fields (tensor specs, the rest as make_resample and
// make_upsample take them).
ResampleDesc resample_of_specs(const std::string& op, const py::tuple& input, const py::object& output,
                               const std::string& mode, const py::object& rounding, const py::object& scales,
                               const py::object& input_offsets, const py::object& output_offsets, bool antialiased) {
  ResampleDesc desc = make_resample(op, tensor_desc_of(input, op + ": input"), mode, rounding, scales, input_offsets,
                                    output_offsets, antialiased);
  if (!output.is_none()) desc.output = tensor_desc_of(output, op + ": output");
  return desc;
}

Upsample2DDesc upsample_of_specs(const py::tuple& input, const py::object& output, const py::object& scale_size,
                                 const std::string& mode) {
  Upsample2DDesc desc = make_upsample(tensor_desc_of(input, "Upsample2D: input"), scale_size, mode);
  if (!output.is_none()) desc.output = tensor_desc_of(output, "Upsample2D: output");
  return desc;
}

}  // namespace

void bind_resample(py::module_& m) {
  m.def(
      "resample_infer",
      [](const std::string& op, const py::tuple& input, const py::object& output, const std::string& mode,
         const py::object& rounding, const py::object& scales, const py::object& input_offsets,
         const py::object& output_offsets, bool antialiased) {
        const ResampleDesc desc =
            resample_of_specs(op, input, output, mode, rounding, scales, input_offsets, output_offsets, antialiased);
        const TensorDesc out = infer_output(desc);
        return py::make_tuple(to_tuple(out.sizes), to_list(desc.scales), to_list(desc.input_pixel_offsets),
                              to_list(desc.output_pixel_offsets));
      },
      "Validates a resample descriptor; returns (output sizes, scales, input offsets, output offsets) as FLOATs.");

  m.def(
      "resample_plan",
      [](const std::string& op, const py::tuple& input, const py::object& output, const std::string& mode,
         const py::object& rounding, const py::object& scales, const py::object& input_offsets,
         const py::object& output_offsets, bool antialiased) {
        return plan_dict(plan(
            resample_of_specs(op, input, output, mode, rounding, scales, input_offsets, output_offsets, antialiased)));
      },
      "The plan of a resample descriptor's calls.");

  m.def(
      "resample",
      [](const std::string& op, const py::object& x, const py::object& out, const py::object& output_sizes,
         const std::string& mode, const py::object& rounding, const py::object& scales, const py::object& input_offsets,
         const py::object& output_offsets, bool antialiased, const py::object& pass_order) {
        const TensorView in_view = view_of(x, op + ": input");
        ResampleDesc desc = make_resample(op, TensorDesc{in_view.dtype, in_view.sizes, std::nullopt}, mode, rounding,
                                          scales, input_offsets, output_offsets, antialiased);
        if (!output_sizes.is_none())
          desc.output = TensorDesc{in_view.dtype, dims_of(output_sizes, op + ": output_sizes"), std::nullopt};
        const Dims order = dims_of(pass_order, op + ": pass_order");
        desc.pass_order.assign(order.begin(), order.end());  // checked by execute()
        return execute_into(desc, x, in_view, out, op);
      },
      "Resamples x into out (allocated when None) and returns it; pass_order: linear's passes over the "
      "resampled axes in this order (empty: the cheapest).");

  m.def(
      "upsample_2d_infer",
      [](const py::tuple& input, const py::object& output, const py::object& scale_size, const std::string& mode) {
        return to_tuple(infer_output(upsample_of_specs(input, output, scale_size, mode)).sizes);
      },
      "Validates an Upsample2D descriptor; returns the output sizes.");

  m.def(
      "upsample_2d_plan",
      [](const py::tuple& input, const py::object& output, const py::object& scale_size, const std::string& mode) {
        return plan_dict(plan(upsample_of_specs(input, output, scale_size, mode)));
      },
      "The plan of an Upsample2D descriptor's calls.");

  m.def(
      "upsample_2d",
      [](const py::object& x, const py::object& out, const py::object& scale_size, const std::string& mode) {
        const TensorView in_view = view_of(x, "Upsample2D: input");
        const Upsample2DDesc desc =
            make_upsample(TensorDesc{in_view.dtype, in_view.sizes, std::nullopt}, scale_size, mode);
        return execute_into(desc, x, in_view, out, "Upsample2D");
      },
      "Upsamples x into out (allocated when None) and returns it.");
}

}  // namespace dmlops::bindings
