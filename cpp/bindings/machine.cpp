// dmlops._core machine measurements for the benchmark report (python/dmlops/bench).
#include "dmlops/machine.hpp"

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/platform.hpp"

#include "convert.hpp"

namespace dmlops::bindings {

void bind_machine(py::module_& m) {
  // Without the GIL: the measurement runs for a while and touches no Python object.
  m.def("fma_peak_gflops", &fma_peak_gflops, py::arg("threads"), py::arg("milliseconds") = 100.0,
        py::call_guard<py::gil_scoped_release>(),
        "float32 FMA GFLOP/s of a register-only loop on `threads` threads (the ISA of fma_isa()).");
  m.def("fma_isa", [] { return kernel_isa(KernelKind::Fma); },
        "The instruction set fma_peak_gflops and the GEMM kernels use: avx512, avx2, sse2, neon or portable.");
  m.def("release_result_memory", &release_result_memory,
        "Frees the memory of large results that dmlops keeps, once their arrays are freed, for later "
        "results of about their size; returns its bytes.");
  m.def("cached_result_bytes", &cached_result_bytes, "The bytes of freed large results that dmlops keeps now.");
  m.def(
      "cache_sizes",
      [] {
        const platform::CacheSizes& c = platform::cache_sizes();
        py::dict d;
        d["l1d"] = c.l1d, d["l2"] = c.l2, d["l3"] = c.l3, d["source"] = c.source;
        return d;
      },
      "The cache sizes in bytes the kernels size their tiles from, and where they were read: "
      "{'l1d', 'l2', 'l3', 'source'}.");
  m.def(
      "cpu_features",
      [] {
        const platform::CpuFeatures& f = platform::cpu_features();
        py::dict d;
        d["avx2"] = f.avx2, d["fma"] = f.fma, d["f16c"] = f.f16c, d["avx512f"] = f.avx512f, d["avx512bw"] = f.avx512bw;
        d["avx512vbmi"] = f.avx512vbmi, d["avx512_half_rate"] = f.avx512_half_rate, d["zen4"] = f.zen4, d["neon"] = f.neon;
        return d;
      },
      "What the processor supports as the kernels read it, whatever the DMLOPS_DISABLE_* switches say "
      "(avx512_half_rate: AVX-512 in two 256-bit halves, as on Zen 4).");
}

}  // namespace dmlops::bindings
