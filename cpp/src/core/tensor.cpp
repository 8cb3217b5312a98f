#include "dmlops/core/tensor.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "dmlops/core/checked.hpp"
#include "dmlops/core/error.hpp"

namespace dmlops {

Dims packed_strides(const Dims& sizes) {
  Dims strides = Dims::filled(sizes.size(), 1);
  for (int d = sizes.size() - 2; d >= 0; --d) strides[d] = strides[d + 1] * sizes[d + 1];
  return strides;
}

std::uint64_t calc_buffer_tensor_size(DataType dtype, const Dims& sizes, const std::optional<Dims>& strides) {
  std::uint64_t elements = 1;
  if (strides) {
    if (strides->size() != sizes.size())
      fail("calc_buffer_tensor_size: strides has ", strides->size(), " entries but sizes has ", sizes.size());
    std::uint64_t last = 0;
    for (int d = 0; d < sizes.size(); ++d) {
      last += static_cast<std::uint64_t>(sizes[d] - 1) * static_cast<std::uint64_t>(std::llabs((*strides)[d]));
    }
    elements = last + 1;
  } else {
    for (std::int64_t s : sizes) elements *= static_cast<std::uint64_t>(s);
  }
  const std::uint64_t bytes = elements * element_size(dtype);
  return (bytes + 3) & ~std::uint64_t{3};
}

TensorDesc checked_output(const TensorDesc& expected, const std::optional<TensorDesc>& given, const std::string& what,
                          const char* rule, const char* note) {
  validate_tensor_desc(expected, what.c_str());
  if (!given) return expected;
  validate_tensor_desc(*given, what.c_str());
  if (given->dtype != expected.dtype)
    fail<DTypeError>(what, " has dtype ", name(given->dtype), " but the input is ", name(expected.dtype));
  if (given->sizes != expected.sizes) fail(what, " has sizes ", given->sizes, rule, expected.sizes, note);
  return *given;
}

void validate_tensor_desc(const TensorDesc& desc, const char* what) {
  const int rank = desc.sizes.size();
  if (rank < 1) fail(what, " has 0 dimensions; tensors have 1 to ", kMaxRank);
  for (int d = 0; d < rank; ++d) {
    if (desc.sizes[d] < 1) fail(what, " sizes[", d, "] is ", desc.sizes[d], "; every size must be >= 1");
  }
  if (desc.strides && desc.strides->size() != rank)
    fail(what, " strides has ", desc.strides->size(), " entries but sizes has ", rank);
  // The tensor's bytes, and the reach of its strides, must stay within 2^62, so that no size or
  // offset computed downstream can overflow.
  const std::int64_t item = static_cast<std::int64_t>(element_size(desc.dtype));
  std::int64_t bytes = item, reach = item, step = 0;
  bool overflow = false;
  for (int d = 0; d < rank && !overflow; ++d) {
    overflow = mul_overflows(bytes, desc.sizes[d], &bytes) || !within_limit(bytes);
    if (!desc.strides || overflow) continue;
    const std::int64_t stride = (*desc.strides)[d];
    overflow = mul_overflows(desc.sizes[d] - 1, stride, &step) || mul_overflows(step, item, &step) ||
               !within_limit(step) || add_overflows(reach, step < 0 ? -step : step, &reach) || !within_limit(reach);
  }
  if (overflow)
    fail(what, " sizes ", desc.sizes, (desc.strides ? " with its strides" : ""), " of ", name(desc.dtype),
         " take more than 2^62 bytes; a tensor's elements and byte offsets must fit in 63 bits");
}

void validate_view(const TensorView& view, const char* what) {
  // numpy accepts any strides (np.lib.stride_tricks.as_strided): a view whose byte offsets do not
  // fit would wrap the offset arithmetic of byte_span() and of every kernel.
  std::int64_t low = 0, high = 0, reach = 0;
  for (int d = 0; d < view.sizes.size(); ++d) {
    if (view.sizes[d] < 1) continue;  // an empty view has no byte offsets (the operators reject it)
    if (mul_overflows(view.sizes[d] - 1, view.byte_strides[d], &reach) ||
        add_overflows(reach < 0 ? low : high, reach, reach < 0 ? &low : &high) || !within_limit(low) ||
        !within_limit(high))
      fail(what, " has strides ", view.byte_strides, " (bytes) whose reach over sizes ", view.sizes,
           " is beyond 2^62 bytes; no array spans that much memory");
  }
}

std::pair<const std::byte*, const std::byte*> TensorView::byte_span() const {
  const auto* base = static_cast<const std::byte*>(data);
  std::int64_t low = 0, high = 0;
  for (int d = 0; d < sizes.size(); ++d) {
    const std::int64_t reach = (sizes[d] - 1) * byte_strides[d];
    (reach < 0 ? low : high) += reach;
  }
  return {base + low, base + high + static_cast<std::int64_t>(element_size(dtype))};
}

bool TensorView::may_self_overlap() const {
  // Sort the dimensions that have more than one element by |stride|; the elements are distinct
  // when each stride steps past everything the smaller dimensions span (sufficient, and true
  // for every layout numpy creates: C, F, transposed, sliced).
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (|stride|, size)
  for (int d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1) dims.emplace_back(std::llabs(byte_strides[d]), sizes[d]);
  }
  std::sort(dims.begin(), dims.end());
  std::int64_t span = static_cast<std::int64_t>(element_size(dtype));
  for (const auto& [stride, size] : dims) {
    if (stride < span) return true;
    span = stride * (size - 1) + span;
  }
  return false;
}

bool may_overlap(const TensorView& a, const TensorView& b) {
  const auto [a_low, a_high] = a.byte_span();
  const auto [b_low, b_high] = b.byte_span();
  return a_low < b_high && b_low < a_high;
}

void check_view_matches(const TensorView& view, const TensorDesc& desc, const char* what, const char* expected) {
  if (view.dtype != desc.dtype)
    fail<DTypeError>(what, " has dtype ", name(view.dtype), " but ", expected, " ", name(desc.dtype));
  if (view.sizes != desc.sizes) fail(what, " has shape ", view.sizes, " but ", expected, " ", desc.sizes);
  if (view.byte_strides.size() != view.sizes.size())
    fail(what, " has ", view.byte_strides.size(), " strides for ", view.sizes.size(), " dimensions");
}

void check_output_view(const TensorView& out, const TensorDesc& desc, const char* what,
                       std::initializer_list<const TensorView*> inputs) {
  // Said of the result, not of a descriptor: functions taking out= have none.
  check_view_matches(out, desc, what, "the result has");
  if (out.may_self_overlap())
    fail(what, " has overlapping elements (a zero or interleaved stride); outputs need distinct elements");
  for (const TensorView* in : inputs) {
    if (may_overlap(out, *in)) fail(what, " shares memory with an input; outputs must not overlap inputs");
  }
}

}  // namespace dmlops
