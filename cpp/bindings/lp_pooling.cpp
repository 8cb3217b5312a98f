// dmlops._core Lp pooling functions. The Python face (python/dmlops/lp_pooling.py) normalises
// the arguments; this file turns them into an LpPoolingDesc and runs it with the GIL released.
#include "dmlops/ops/lp_pooling.hpp"

#include "convert.hpp"

namespace dmlops::bindings {
namespace {

// `dilations` is None for LpPooling (v1) and when the caller left them at 1.
LpPoolingDesc make_desc(const std::string& op, const TensorDesc& input, const py::handle& strides,
                        const py::handle& window, const py::handle& start, const py::handle& end,
                        const py::handle& dilations, const py::handle& p) {
  LpPoolingDesc desc;
  desc.op_name = op;
  desc.input = input;
  desc.strides = dims_of(strides, op + ": strides");
  desc.window_size = dims_of(window, op + ": window_size");
  desc.start_padding = dims_of(start, op + ": start_padding");
  desc.end_padding = dims_of(end, op + ": end_padding");
  if (!dilations.is_none()) desc.dilations = dims_of(dilations, op + ": dilations");
  if (py::isinstance<py::bool_>(p) || !py::isinstance<py::int_>(p))
    fail<DTypeError>(op, ": p must be an integer, not ", py::str(py::type::of(p).attr("__name__")).cast<std::string>());
  int overflow = 0;
  desc.p = PyLong_AsLongLongAndOverflow(p.ptr(), &overflow);
  // Beyond 64 bits is beyond UINT (or below 1) as well: say so with the caller's number.
  if (overflow > 0) fail(op, ": p is ", py::repr(p).cast<std::string>(), "; P is a UINT, at most ", kLpPoolingMaxP);
  if (overflow < 0) fail(op, ": p is ", py::repr(p).cast<std::string>(), "; it must be >= 1");
  return desc;
}

// The descriptor of a Python descriptor's fields (tensor specs, the rest as make_desc takes them).
LpPoolingDesc desc_of_specs(const std::string& op, const py::tuple& input, const py::object& output,
                            const py::handle& strides, const py::handle& window, const py::handle& start,
                            const py::handle& end, const py::handle& dilations, const py::handle& p) {
  LpPoolingDesc desc = make_desc(op, tensor_desc_of(input, op + ": input"), strides, window, start, end, dilations, p);
  if (!output.is_none()) desc.output = tensor_desc_of(output, op + ": output");
  return desc;
}

}  // namespace

void bind_lp_pooling(py::module_& m) {
  m.def(
      "lp_pooling_infer",
      [](const std::string& op, const py::tuple& input, const py::object& output, const py::object& strides,
         const py::object& window, const py::object& start, const py::object& end, const py::object& dilations,
         const py::object& p) {
        return to_tuple(infer_output(desc_of_specs(op, input, output, strides, window, start, end, dilations, p)).sizes);
      },
      "Validates an Lp pooling descriptor; returns the output sizes.");

  m.def(
      "lp_pooling_plan",
      [](const std::string& op, const py::tuple& input, const py::object& output, const py::object& strides,
         const py::object& window, const py::object& start, const py::object& end, const py::object& dilations,
         const py::object& p) {
        return plan_dict(plan(desc_of_specs(op, input, output, strides, window, start, end, dilations, p)));
      },
      "The plan of an Lp pooling descriptor's calls.");

  m.def(
      "lp_pooling",
      [](const std::string& op, const py::object& x, const py::object& out, const py::object& strides,
         const py::object& window, const py::object& start, const py::object& end, const py::object& dilations,
         const py::object& p) {
        const TensorView in_view = view_of(x, op + ": input");
        const LpPoolingDesc desc = make_desc(op, TensorDesc{in_view.dtype, in_view.sizes, std::nullopt}, strides,
                                             window, start, end, dilations, p);
        return execute_into(desc, x, in_view, out, op);
      },
      "Lp-pools x into out (allocated when None) and returns it.");
}

}  // namespace dmlops::bindings
