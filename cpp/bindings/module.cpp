// dmlops._core: the pybind11 module. One bind_<op>() per operator file; this file holds the
// exception mapping and the library-wide functions (threads, dtypes, buffer sizes).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>

#include "convert.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/cpu.hpp"
#include "dmlops/core/parallel.hpp"

namespace py = pybind11;

// For threadpoolctl (dmlops/_threads.py registers a controller that finds this module by these
// symbols): the process-wide count, as BLAS libraries expose theirs.
extern "C" {
__attribute__((visibility("default"))) int dmlops_get_num_threads() { return dmlops::global_num_threads(); }
__attribute__((visibility("default"))) void dmlops_set_num_threads(int n) {
  if (n >= 1) dmlops::set_num_threads(std::min(n, dmlops::kMaxThreads));
}
}

namespace dmlops::bindings {
void bind_padding(py::module_& m);
void bind_unfold(py::module_& m);
void bind_resample(py::module_& m);
void bind_convolution(py::module_& m);
void bind_lp_pooling(py::module_& m);
void bind_machine(py::module_& m);
}  // namespace dmlops::bindings

PYBIND11_MODULE(_core, m) {
  using namespace dmlops;
  using namespace dmlops::bindings;
  m.doc() = "dmlops C++ kernels (use the dmlops package, not this module)";

  // DTypeError derives from std::invalid_argument (which pybind11 maps to ValueError), so it
  // is caught first here.
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const DTypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  m.def("set_num_threads", &set_num_threads, py::arg("n"));
  m.def("get_num_threads", &num_threads);
  m.def("global_num_threads", &global_num_threads);
  m.def("set_local_num_threads", &set_local_num_threads, py::arg("n"));
  m.def("default_num_threads", &default_num_threads);
  m.def("parse_num_threads", [](const std::string& text) { return parse_num_threads(text); }, py::arg("text"));
  m.def("f16c_enabled", &f16c_enabled);
  m.def(
      "calc_buffer_tensor_size",
      [](const std::string& dtype, const py::object& sizes, const py::object& strides) {
        const TensorDesc desc = tensor_desc_of(py::make_tuple(dtype, sizes, strides), "calc_buffer_tensor_size:");
        validate_tensor_desc(desc, "calc_buffer_tensor_size: tensor");
        return calc_buffer_tensor_size(desc.dtype, desc.sizes, desc.strides);
      },
      py::arg("dtype"), py::arg("sizes"), py::arg("strides") = py::none());
  m.def(
      "validate_tensor_desc",
      [](const py::tuple& desc, const std::string& what) { validate_tensor_desc(tensor_desc_of(desc, what), what.c_str()); },
      "Checks (dtype, sizes, strides) against the TensorDesc rules.");

  bind_padding(m);
  bind_unfold(m);
  bind_resample(m);
  bind_convolution(m);
  bind_lp_pooling(m);
  bind_machine(m);
}
