// dmlops._core machine measurements for the benchmark report (python/dmlops/bench).
#include "dmlops/machine.hpp"

#include "convert.hpp"

namespace dmlops::bindings {

void bind_machine(py::module_& m) {
  // Without the GIL: the measurement runs for a while and touches no Python object.
  m.def("fma_peak_gflops", &fma_peak_gflops, py::arg("threads"), py::arg("milliseconds") = 100.0,
        py::call_guard<py::gil_scoped_release>(),
        "float32 FMA GFLOP/s of a register-only loop on `threads` threads (the ISA of fma_isa()).");
  m.def("fma_isa", &fma_isa, "The instruction set fma_peak_gflops and the GEMM kernels use.");
}

}  // namespace dmlops::bindings
