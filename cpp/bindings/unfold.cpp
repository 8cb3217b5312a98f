// dmlops._core unfold and fold functions. The Python face (python/dmlops/unfold.py) fills in
// the default arrays; this file turns the arguments into an UnfoldDesc / FoldDesc and runs it
// with the GIL released.
#include "dmlops/ops/unfold.hpp"

#include <vector>

#include "convert.hpp"
#include "dmlops/core/checked.hpp"
#include "dmlops/core/error.hpp"

namespace dmlops::bindings {
namespace {

// The five per-dimension arrays, in DML_UNFOLD/FOLD_OPERATOR_DESC order.
template <class Desc>
void set_windows(Desc& desc, const std::string& op, const py::handle& window, const py::handle& strides,
                 const py::handle& dilations, const py::handle& start, const py::handle& end) {
  desc.window_sizes = dims_of(window, op + ": window_sizes");
  desc.strides = dims_of(strides, op + ": strides");
  desc.dilations = dims_of(dilations, op + ": dilations");
  desc.start_padding = dims_of(start, op + ": start_padding");
  desc.end_padding = dims_of(end, op + ": end_padding");
}

// Fold's output desc from the spatial output_sizes: {N, C, S...} with C = rows / prod(window).
// When the window is invalid or does not divide the rows, C is a placeholder: infer_output
// then reports that rule, which it checks before comparing channel counts.
TensorDesc fold_output_desc(const TensorDesc& input, const Dims& window, const py::handle& output_sizes) {
  const Dims spatial = dims_of(output_sizes, "Fold: output_sizes");
  if (spatial.size() < 1 || spatial.size() > kMaxRank - 2)
    fail("Fold: output_sizes has ", spatial.size(), " entries; folds have 1 to 6 spatial dimensions");
  std::int64_t taps = 1;
  bool valid = true;
  for (std::int64_t w : window) valid = valid && w >= 1 && !mul_overflows(taps, w, &taps);
  const bool shaped = input.sizes.size() == 3;
  const std::int64_t batch = shaped ? input.sizes[0] : 1, rows = shaped ? input.sizes[1] : 1;
  TensorDesc out{input.dtype, {batch, valid && rows % taps == 0 ? rows / taps : 1}, std::nullopt};
  for (std::int64_t s : spatial) out.sizes.push_back(s);
  return out;
}

void reject_bool(const py::object& x) {
  if (py::isinstance<py::array>(x) && py::reinterpret_borrow<py::array>(x).dtype().kind() == 'b')
    fail<DTypeError>("Fold: input has dtype bool, but sums of bools are not bools; pass x.astype(np.int32) to count "
                     "overlaps (or x.view(np.uint8), which wraps at 256)");
}

// The descriptors of Python descriptors' fields (tensor specs, the window arrays).
UnfoldDesc unfold_of_specs(const py::tuple& input, const py::object& output, const py::object& window,
                           const py::object& strides, const py::object& dilations, const py::object& start,
                           const py::object& end) {
  UnfoldDesc desc;
  desc.input = tensor_desc_of(input, "Unfold: input");
  if (!output.is_none()) desc.output = tensor_desc_of(output, "Unfold: output");
  set_windows(desc, "Unfold", window, strides, dilations, start, end);
  return desc;
}

FoldDesc fold_of_specs(const py::tuple& input, const py::tuple& output, const py::object& window,
                       const py::object& strides, const py::object& dilations, const py::object& start,
                       const py::object& end) {
  FoldDesc desc;
  desc.input = tensor_desc_of(input, "Fold: input");
  desc.output = tensor_desc_of(output, "Fold: output");
  set_windows(desc, "Fold", window, strides, dilations, start, end);
  return desc;
}

}  // namespace

void bind_unfold(py::module_& m) {
  m.def(
      "unfold_infer",
      [](const py::tuple& input, const py::object& output, const py::object& window, const py::object& strides,
         const py::object& dilations, const py::object& start, const py::object& end) {
        return to_tuple(infer_output(unfold_of_specs(input, output, window, strides, dilations, start, end)).sizes);
      },
      "Validates an unfold descriptor; returns the output sizes.");

  m.def(
      "unfold_plan",
      [](const py::tuple& input, const py::object& output, const py::object& window, const py::object& strides,
         const py::object& dilations, const py::object& start, const py::object& end) {
        return plan_dict(plan(unfold_of_specs(input, output, window, strides, dilations, start, end)));
      },
      "The plan of an unfold descriptor's calls.");

  m.def(
      "unfold",
      [](const py::object& x, const py::object& out, const py::object& window, const py::object& strides,
         const py::object& dilations, const py::object& start, const py::object& end) {
        const TensorView in_view = view_of(x, "Unfold: input");
        UnfoldDesc desc;
        desc.input = TensorDesc{in_view.dtype, in_view.sizes, std::nullopt};
        set_windows(desc, "Unfold", window, strides, dilations, start, end);
        const py::array result = output_array(x, infer_output(desc), out, "Unfold");  // validated before allocating
        const TensorView out_view = view_of(result, "Unfold: out", /*writable=*/true);
        {
          // Safe without the GIL: the views point into arrays this frame keeps alive, and
          // execute() touches no Python object.
          py::gil_scoped_release release;
          execute(desc, in_view, out_view);
        }
        return result;
      },
      "Unfolds x into out (allocated when None) and returns it.");

  m.def(
      "fold_infer",
      [](const py::tuple& input, const py::tuple& output, const py::object& window, const py::object& strides,
         const py::object& dilations, const py::object& start, const py::object& end) {
        return to_tuple(infer_output(fold_of_specs(input, output, window, strides, dilations, start, end)).sizes);
      },
      "Validates a fold descriptor; returns the output sizes.");

  m.def(
      "fold_plan",
      [](const py::tuple& input, const py::tuple& output, const py::object& window, const py::object& strides,
         const py::object& dilations, const py::object& start, const py::object& end) {
        return plan_dict(plan(fold_of_specs(input, output, window, strides, dilations, start, end)));
      },
      "The plan of a fold descriptor's calls.");

  m.def(
      "fold",
      [](const py::object& x, const py::object& out, const py::object& output_sizes, const py::object& window,
         const py::object& strides, const py::object& dilations, const py::object& start, const py::object& end) {
        const TensorView in_view = view_of(x, "Fold: input");
        reject_bool(x);
        FoldDesc desc;
        desc.input = TensorDesc{in_view.dtype, in_view.sizes, std::nullopt};
        set_windows(desc, "Fold", window, strides, dilations, start, end);
        desc.output = fold_output_desc(desc.input, desc.window_sizes, output_sizes);
        const py::array result = output_array(x, infer_output(desc), out, "Fold");
        const TensorView out_view = view_of(result, "Fold: out", /*writable=*/true);
        {
          // Safe without the GIL: as for unfold.
          py::gil_scoped_release release;
          execute(desc, in_view, out_view);
        }
        return result;
      },
      "Folds x into out (allocated when None) and returns it.");
}

}  // namespace dmlops::bindings
