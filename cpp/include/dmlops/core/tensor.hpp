// TensorDesc: the DirectML-shaped description (sizes + signed strides in elements).
// TensorView: what kernels see (dtype, sizes, base pointer, signed strides in bytes:
// numpy's convention, so any numpy array maps onto one without a copy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "dmlops/core/dims.hpp"
#include "dmlops/core/dtype.hpp"

namespace dmlops {

// Row-major strides (in elements) of a packed tensor of these sizes.
Dims packed_strides(const Dims& sizes);

// DMLCalcBufferTensorSize: bytes a buffer needs to hold the tensor, rounded up to a multiple
// of 4. Strides may be negative here (numpy views); the span uses their absolute values.
std::uint64_t calc_buffer_tensor_size(DataType dtype, const Dims& sizes,
                                      const std::optional<Dims>& strides = std::nullopt);

struct TensorDesc {
  DataType dtype = DataType::Float32;
  Dims sizes;
  std::optional<Dims> strides;  // elements; nullopt = packed

  std::int64_t element_count() const { return sizes.product(); }
  friend bool operator==(const TensorDesc& a, const TensorDesc& b) {
    return a.dtype == b.dtype && a.sizes == b.sizes && a.strides == b.strides;
  }
};

// Checks a TensorDesc: rank 1..8, sizes >= 1, strides (if any) one per dimension.
// `what` names it in messages, e.g. "Padding1: input".
void validate_tensor_desc(const TensorDesc& desc, const char* what);

// An operator's output: `expected` (what its rule gives, in the input's dtype) once checked as
// a tensor, or the caller's `given` desc once checked against it. `what` names it ("Padding1:
// output"); a size mismatch reads "<what> has sizes <given><rule><expected><note>", e.g. rule
// " but the window geometry gives ".
TensorDesc checked_output(const TensorDesc& expected, const std::optional<TensorDesc>& given, const std::string& what,
                          const char* rule, const char* note = "");

struct TensorView {
  DataType dtype = DataType::Float32;
  Dims sizes;
  Dims byte_strides;
  void* data = nullptr;  // address of element [0, ..., 0]

  std::int64_t element_count() const { return sizes.product(); }
  // Lowest and one-past-highest byte address any element touches.
  std::pair<const std::byte*, const std::byte*> byte_span() const;
  // Conservative: true when two elements might share bytes (zero strides, interleaving).
  bool may_self_overlap() const;
};

bool may_overlap(const TensorView& a, const TensorView& b);

// Checks that every byte offset of `view` (the lowest and highest reached through its strides)
// is within +-2^62, else InvalidArgument naming `what`. Every view from outside passes here
// (bindings' view_of) before a kernel or an overlap test computes with its strides.
void validate_view(const TensorView& view, const char* what);

// Checks that `view` fits `desc` (dtype and sizes), else DTypeError / InvalidArgument saying
// "<what> has shape ... but <expected> ...".
void check_view_matches(const TensorView& view, const TensorDesc& desc, const char* what,
                        const char* expected = "the descriptor says");
// Checks an output view: matches `desc`, its elements are distinct, it shares no memory
// with any input. Called before any byte is written.
void check_output_view(const TensorView& out, const TensorDesc& desc, const char* what,
                       std::initializer_list<const TensorView*> inputs);

inline bool aligned(const void* p, std::size_t alignment) { return reinterpret_cast<std::uintptr_t>(p) % alignment == 0; }

// A view of Acc values whose strides are whole elements: a kernel may read or write it as Acc*.
template <class Acc>
bool elements_of(const TensorView& t) {
  bool ok = aligned(t.data, alignof(Acc));
  for (std::int64_t s : t.byte_strides) ok = ok && s % std::int64_t{sizeof(Acc)} == 0;
  return ok;
}

// A view (N, C, spatial...) of Acc whose every channel's plane is one contiguous run (position p
// at element p), the planes apart: a kernel may sum or write a plane in place as Acc*.
template <class Acc>
bool planes_contiguous(const TensorView& t) {
  if (!elements_of<Acc>(t)) return false;
  std::int64_t expected = sizeof(Acc), plane = 1;
  for (int a = t.sizes.size(); a-- > 2;) {
    if (t.sizes[a] != 1 && t.byte_strides[a] != expected) return false;
    expected *= t.sizes[a], plane *= t.sizes[a];
  }
  const std::int64_t channel = t.byte_strides[1];
  return t.sizes[1] == 1 || channel >= plane * std::int64_t{sizeof(Acc)} || -channel >= plane * std::int64_t{sizeof(Acc)};
}

}  // namespace dmlops
