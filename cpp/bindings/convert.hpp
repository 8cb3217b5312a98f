// numpy <-> dmlops conversions shared by every operator's binding.
// Nothing here copies array data: a TensorView points at the array's own buffer.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <vector>

#include "dmlops/core/dtype.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/plan.hpp"
#include "dmlops/core/tensor.hpp"

namespace dmlops::bindings {

namespace py = pybind11;

// The array's DataType (bool -> UInt8), or DTypeError naming `what`.
DataType data_type_of(const py::array& array, const std::string& what);

// `obj` must be a numpy.ndarray (TypeError otherwise); returns a view of its memory.
// With `writable`, a read-only array is a ValueError.
TensorView view_of(const py::handle& obj, const std::string& what, bool writable = false);

// A sequence of Python ints (at most 8) -> Dims; TypeError / ValueError naming `what`.
Dims dims_of(const py::handle& obj, const std::string& what);

// A sequence of Python numbers (at most 8) -> DirectML FLOATs (rounded to float32); TypeError for
// anything but int or float, ValueError for a finite value too large for a FLOAT.
std::vector<float> floats_of(const py::handle& obj, const std::string& what);

// (dtype name, sizes, strides or None) -> TensorDesc.
TensorDesc tensor_desc_of(const py::handle& obj, const std::string& what);

// A Python int, float or bool -> Number; TypeError naming `what` otherwise.
Number number_of(const py::handle& obj, const std::string& what);

py::tuple to_tuple(const Dims& dims);

// A plan as the Python layer's Plan takes it: {algorithm, reason, isa, rewrite, tiles, tasks, threads}.
py::dict plan_dict(const KernelPlan& plan);

// `message` with the word uint8 said as bool.
std::string bool_named(const std::string& message);

// f(), whose DTypeError names x's dtype bool when x is a bool array: the core reads bool as its
// UINT8 storage and says uint8, but the caller passed bool.
template <class F>
decltype(auto) naming_bool(const py::handle& x, F&& f) {
  try {
    return f();
  } catch (const DTypeError& e) {
    if (!py::isinstance<py::array>(x) || py::reinterpret_borrow<py::array>(x).dtype().kind() != 'b') throw;
    throw DTypeError(bool_named(e.what()));
  }
}

// The array for an operator's result: `out` when given, else a new C-contiguous array of
// `like`'s numpy dtype (bool stays bool) and `desc`'s sizes. A result larger than this machine's
// physical memory is refused with a ValueError before anything is allocated (an overcommitted
// allocation would "succeed" and the kernel would then fault its pages in until the OOM killer
// ends the process).
py::array output_array(const py::object& like, const TensorDesc& desc, const py::object& out, const std::string& op);

// Large results' memory kept for later results (see ResultBlocks in convert.cpp): frees it all
// and returns its bytes; the bytes kept now.
std::size_t release_result_memory();
std::size_t cached_result_bytes();

// Runs an operator descriptor on x: into `out`, or (None) into a new array (output_array)
// allocated only after infer_output(desc) has validated everything. `op` names the operator.
template <class Desc>
py::array execute_into(const Desc& desc, const py::object& x, const TensorView& in_view, const py::object& out,
                       const std::string& op) {
  py::array result = output_array(x, naming_bool(x, [&] { return infer_output(desc); }), out, op);
  const TensorView out_view = view_of(result, op + ": out", /*writable=*/true);
  {
    // Safe without the GIL: the views point into arrays this frame keeps alive, and execute()
    // touches no Python object.
    py::gil_scoped_release release;
    execute(desc, in_view, out_view);
  }
  return result;
}

}  // namespace dmlops::bindings
