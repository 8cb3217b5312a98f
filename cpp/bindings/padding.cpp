// dmlops._core padding functions. The Python face (python/dmlops/padding.py) normalises the
// arguments; this file turns them into a PaddingDesc and runs it with the GIL released.
#include "dmlops/ops/padding.hpp"

#include <cmath>

#include "convert.hpp"
#include "dmlops/core/error.hpp"

namespace dmlops::bindings {
namespace {

// exact=true: PADDING1 (value must be representable); false: PADDING (FLOAT value,
// truncated and saturated into integer dtypes).
PaddingDesc make_desc(const std::string& op, const TensorDesc& input, const std::string& mode,
                      const py::handle& start, const py::handle& end, const py::handle& value, bool exact) {
  PaddingDesc desc;
  desc.op_name = op;
  desc.input = input;
  desc.mode = parse_padding_mode(mode);
  desc.start_padding = dims_of(start, op + ": start_padding");
  desc.end_padding = dims_of(end, op + ": end_padding");
  const std::string field = op + ": padding_value";
  const Number number = number_of(value, field);
  if (exact) {
    desc.value = Scalar::exact(input.dtype, number, field);
  } else {
    if (number.kind != Number::Kind::Float) fail<DTypeError>(field, " must be a float (DML_PADDING_OPERATOR_DESC)");
    const auto value_float = static_cast<float>(number.f);
    if (std::isfinite(number.f) && !std::isfinite(value_float))
      fail(field, " ", number.f, " is too large for a FLOAT (DML_PADDING_OPERATOR_DESC)");
    desc.value = Scalar::saturating(input.dtype, value_float);
  }
  return desc;
}

// The descriptor of a Python descriptor's fields (tensor specs, the rest as make_desc takes them).
PaddingDesc desc_of_specs(const std::string& op, const py::tuple& input, const py::object& output,
                          const std::string& mode, const py::handle& start, const py::handle& end,
                          const py::handle& value, bool exact) {
  PaddingDesc desc = make_desc(op, tensor_desc_of(input, op + ": input"), mode, start, end, value, exact);
  if (!output.is_none()) desc.output = tensor_desc_of(output, op + ": output");
  return desc;
}

}  // namespace

void bind_padding(py::module_& m) {
  m.def(
      "padding_infer",
      [](const std::string& op, const py::tuple& input, const py::object& output, const std::string& mode,
         const py::object& start, const py::object& end, const py::object& value, bool exact) {
        const PaddingDesc desc = desc_of_specs(op, input, output, mode, start, end, value, exact);
        const TensorDesc out = infer_output(desc);
        return py::make_tuple(to_tuple(out.sizes), desc.value.bits);
      },
      "Validates a padding descriptor; returns (output sizes, padding value bits).");

  m.def(
      "padding_plan",
      [](const std::string& op, const py::tuple& input, const py::object& output, const std::string& mode,
         const py::object& start, const py::object& end, const py::object& value, bool exact) {
        return plan_dict(plan(desc_of_specs(op, input, output, mode, start, end, value, exact)));
      },
      "The plan of a padding descriptor's calls.");

  m.def(
      "padding",
      [](const std::string& op, const py::object& x, const py::object& out, const std::string& mode,
         const py::object& start, const py::object& end, const py::object& value, bool exact) {
        const TensorView in_view = view_of(x, op + ": input");
        const PaddingDesc desc = make_desc(op, TensorDesc{in_view.dtype, in_view.sizes, std::nullopt}, mode,
                                           start, end, value, exact);
        return execute_into(desc, x, in_view, out, op);
      },
      "Pads x into out (allocated when None) and returns it.");
}

}  // namespace dmlops::bindings
