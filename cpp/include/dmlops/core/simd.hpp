// DMLOPS_VECTOR_KERNEL: runtime ISA dispatch for plain C++ loops.
//
// Put it on a small function (or function template) that holds a hot, auto-vectorisable loop:
//
//   template <class A>
//   DMLOPS_VECTOR_KERNEL void add_squares(A* acc, const A* x, std::int64_t n) { ... }
//
// GCC and Clang then compile the function twice, for AVX2 and for the baseline (SSE2), and
// the dynamic loader binds each call to the copy the CPU supports (target_clones, an ifunc).
// Only such leaf loops are cloned: compiling whole files with -mavx2 would let the linker keep
// an AVX2 copy of some inline function for every caller and crash on older CPUs.
//
// The two copies return bit-identical results: the source is the same, the vectoriser does not
// reorder floating-point operations within an element (no -ffast-math), and "avx2" without
// "fma" leaves no room for contracting a*b+c. Where target_clones is unavailable (not x86-64,
// not glibc's ifunc), or with DMLOPS_NO_VECTOR_CLONES defined (CMake DMLOPS_VECTOR_CLONES=OFF,
// to test the baseline on an AVX2 machine), the macro is empty and the baseline is all there is.
#pragma once

#include <cstddef>  // defines __GLIBC__ on glibc systems

#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute) && !defined(DMLOPS_NO_VECTOR_CLONES)
#if __has_attribute(target_clones)
#define DMLOPS_VECTOR_KERNEL __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef DMLOPS_VECTOR_KERNEL
#define DMLOPS_VECTOR_KERNEL
#endif
