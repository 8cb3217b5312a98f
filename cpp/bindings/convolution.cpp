// dmlops._core convolution functions. The Python face (python/dmlops/convolution.py) normalises
// the arguments (names, defaults, Activation objects); this file turns them into a
// ConvolutionDesc and runs it with the GIL released.
#include "dmlops/ops/convolution.hpp"

#include <memory>
#include <vector>

#include "convert.hpp"
#include "dmlops/core/activation.hpp"

namespace dmlops::bindings {
namespace {

// (name, [parameters in table order]) or None.
std::optional<FusedActivation> activation_of(const py::object& obj) {
  if (obj.is_none()) return std::nullopt;
  const auto fields = obj.cast<py::tuple>();
  return make_activation("Convolution", fields[0].cast<std::string>(),
                         floats_of(fields[1], "Convolution: fused_activation parameters"));
}

ConvolutionDesc make_desc(const TensorDesc& input, const TensorDesc& filter, const std::optional<TensorDesc>& bias,
                          const std::string& mode, const std::string& direction, const py::object& strides,
                          const py::object& dilations, const py::object& start, const py::object& end,
                          const py::object& output_padding, std::int64_t group_count, const py::object& activation) {
  ConvolutionDesc desc;
  desc.input = input;
  desc.filter = filter;
  desc.bias = bias;
  desc.mode = parse_convolution_mode(mode);
  desc.direction = parse_convolution_direction(direction);
  desc.strides = dims_of(strides, "Convolution: strides");
  desc.dilations = dims_of(dilations, "Convolution: dilations");
  desc.start_padding = dims_of(start, "Convolution: start_padding");
  desc.end_padding = dims_of(end, "Convolution: end_padding");
  desc.output_padding = dims_of(output_padding, "Convolution: output_padding");
  desc.group_count = group_count;
  desc.fused_activation = activation_of(activation);
  return desc;
}

// The descriptor of a Python descriptor's fields (tensor specs, the rest as make_desc takes them).
ConvolutionDesc desc_of_specs(const py::tuple& input, const py::tuple& filter, const py::object& bias,
                              const py::object& output, const std::string& mode, const std::string& direction,
                              const py::object& strides, const py::object& dilations, const py::object& start,
                              const py::object& end, const py::object& output_padding, std::int64_t group_count,
                              const py::object& activation) {
  std::optional<TensorDesc> bias_desc;
  if (!bias.is_none()) bias_desc = tensor_desc_of(bias, "Convolution: bias");
  ConvolutionDesc desc = make_desc(tensor_desc_of(input, "Convolution: input"), tensor_desc_of(filter, "Convolution: filter"),
                                   bias_desc, mode, direction, strides, dilations, start, end, output_padding,
                                   group_count, activation);
  if (!output.is_none()) desc.output = tensor_desc_of(output, "Convolution: output");
  return desc;
}

TensorDesc packed_desc(const TensorView& view) { return TensorDesc{view.dtype, view.sizes, std::nullopt}; }

// A PreparedConvolution and the arrays its views point into (the Python layer's copies),
// kept alive with it.
struct Prepared {
  py::object filter, bias;
  TensorDesc output;
  std::unique_ptr<PreparedConvolution> prepared;
};

}  // namespace

void bind_convolution(py::module_& m) {
  m.def("activation_table", [] {
    py::list table;
    for (const ActivationInfo& info : activation_table()) {
      py::list params;
      for (const ActivationParameter& p : info.parameters)
        params.append(py::make_tuple(p.name, p.dml, p.default_value ? py::cast(*p.default_value) : py::none()));
      table.append(py::make_tuple(info.name, info.dml_type, params));
    }
    return table;
  }, "The fused activations: (name, DirectML type, [(parameter, DirectML member, default or None)]).");

  m.def("activation_check", [](const std::string& name, const py::object& parameters) {
    make_activation("Activation", name, floats_of(parameters, "Activation: parameters"));
  }, "Validates an activation's parameter values.");

  m.def(
      "convolution_infer",
      [](const py::tuple& input, const py::tuple& filter, const py::object& bias, const py::object& output,
         const std::string& mode, const std::string& direction, const py::object& strides, const py::object& dilations,
         const py::object& start, const py::object& end, const py::object& output_padding, std::int64_t group_count,
         const py::object& activation) {
        const ConvolutionDesc desc = desc_of_specs(input, filter, bias, output, mode, direction, strides, dilations,
                                                   start, end, output_padding, group_count, activation);
        return to_tuple(infer_output(desc).sizes);
      },
      "Validates a convolution descriptor; returns the output sizes.");

  m.def(
      "convolution",
      [](const py::object& x, const py::object& filter, const py::object& bias, const py::object& out,
         const py::object& output_sizes, const std::string& mode, const std::string& direction,
         const py::object& strides, const py::object& dilations, const py::object& start, const py::object& end,
         const py::object& output_padding, std::int64_t group_count, const py::object& activation,
         const std::string& algorithm) {
        const TensorView in_view = view_of(x, "Convolution: input");
        const TensorView filter_view = view_of(filter, "Convolution: filter");
        std::optional<TensorView> bias_view;
        if (!bias.is_none()) bias_view = view_of(bias, "Convolution: bias");
        ConvolutionDesc desc = make_desc(packed_desc(in_view), packed_desc(filter_view),
                                         bias_view ? std::optional<TensorDesc>(packed_desc(*bias_view)) : std::nullopt,
                                         mode, direction, strides, dilations, start, end, output_padding, group_count,
                                         activation);
        if (!output_sizes.is_none())
          desc.output = TensorDesc{in_view.dtype, dims_of(output_sizes, "Convolution: output_sizes"), std::nullopt};
        // validated before allocating
        py::array result = output_array(x, naming_bool(x, [&] { return infer_output(desc); }), out, "Convolution");
        const TensorView out_view = view_of(result, "Convolution: out", /*writable=*/true);
        {
          // Safe without the GIL: the views point into arrays this frame keeps alive, and
          // execute() touches no Python object.
          py::gil_scoped_release release;
          execute(desc, in_view, filter_view, bias_view ? &*bias_view : nullptr, out_view, algorithm);
        }
        return result;
      },
      "Convolves x with filter (plus bias) into out (allocated when None) and returns it; a non-empty "
      "algorithm forces that algorithm.");

  m.def("convolution_algorithms", [] {
    py::list names;
    for (const std::string& name : convolution_algorithms()) names.append(name);
    return names;
  }, "The convolution algorithms in the order they are tried.");

  m.def(
      "convolution_plan",
      [](const py::tuple& input, const py::tuple& filter, const py::object& bias, const py::object& output,
         const std::string& mode, const std::string& direction, const py::object& strides, const py::object& dilations,
         const py::object& start, const py::object& end, const py::object& output_padding, std::int64_t group_count,
         const py::object& activation, const std::string& algorithm) {
        const ConvolutionDesc desc = desc_of_specs(input, filter, bias, output, mode, direction, strides, dilations,
                                                   start, end, output_padding, group_count, activation);
        return plan_dict(plan_convolution(desc, algorithm));
      },
      "The plan of a convolution descriptor's calls: algorithm, reason, isa, rewrite, tiles, tasks, threads.");

  // What convolution_prepare returns (an underscore name: only that function makes one).
  py::class_<Prepared>(m, "_PreparedConvolution", "A convolution with its filter (and bias) fixed and packed.")
      .def(
          "__call__",
          [](const Prepared& p, const py::object& x, const py::object& out) {
            const TensorView in_view = view_of(x, "Convolution: input");
            py::array result = output_array(x, p.output, out, "Convolution");
            const TensorView out_view = view_of(result, "Convolution: out", /*writable=*/true);
            {
              py::gil_scoped_release release;  // as in convolution(): views into arrays this frame keeps alive
              (*p.prepared)(in_view, out_view);
            }
            return result;
          },
          py::arg("x"), py::arg("out") = py::none(), "Convolves x into out (allocated when None) and returns it.")
      .def("plan", [](const Prepared& p) { return plan_dict(p.prepared->plan()); }, "The plan the calls follow.")
      .def_property_readonly("packed", [](const Prepared& p) { return p.prepared->packed(); },
                             "Whether the filter was packed once (gemm, direct).");

  m.def("convolution_prepare",
        [](const py::tuple& input, const py::object& filter, const py::object& bias, const py::object& output_sizes,
           const std::string& mode, const std::string& direction, const py::object& strides,
           const py::object& dilations, const py::object& start, const py::object& end,
           const py::object& output_padding, std::int64_t group_count, const py::object& activation,
           const std::string& algorithm) {
          const TensorView filter_view = view_of(filter, "Convolution: filter");
          std::optional<TensorView> bias_view;
          if (!bias.is_none()) bias_view = view_of(bias, "Convolution: bias");
          const TensorDesc in_desc = tensor_desc_of(input, "Convolution: input");
          ConvolutionDesc desc = make_desc(TensorDesc{in_desc.dtype, in_desc.sizes, std::nullopt},
                                           packed_desc(filter_view),
                                           bias_view ? std::optional<TensorDesc>(packed_desc(*bias_view)) : std::nullopt,
                                           mode, direction, strides, dilations, start, end, output_padding,
                                           group_count, activation);
          if (!output_sizes.is_none())
            desc.output = TensorDesc{in_desc.dtype, dims_of(output_sizes, "Convolution: output_sizes"), std::nullopt};
          auto p = std::make_unique<Prepared>(Prepared{filter, bias, infer_output(desc), nullptr});
          py::gil_scoped_release release;  // the packing touches no Python object
          p->prepared = std::make_unique<PreparedConvolution>(desc, filter_view, bias_view ? &*bias_view : nullptr,
                                                              algorithm);
          return p;
        },
        "Chooses the algorithm and packs the filter (arrays that must not change afterwards).");
}

}  // namespace dmlops::bindings
