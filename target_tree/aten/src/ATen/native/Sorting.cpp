#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/Sorting.h>

#include <ATen/core/Tensor.h>
#include <ATen/TensorMeta.h>
#include <ATen/WrapDimUtils.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/topk_meta.h>
#include <ATen/ops/topk_native.h>
#endif

// topk: the k largest (or smallest) entries along one dimension, as two
// outputs: their values, and their int64 indices into that dimension.

namespace at::meta {

TORCH_META_FUNC(topk)
(const Tensor& input, int64_t count, int64_t along, bool largest, bool sorted) {
  const int64_t dim = maybe_wrap_dim(along, input.dim(), /*wrap_scalar=*/true);
  const int64_t extent = input.dim() == 0 ? 1 : input.size(dim);
  TORCH_CHECK(count >= 0 && count <= extent, "selected index k out of range");
  DimVector shape(input.sizes().begin(), input.sizes().end());
  if (!shape.empty()) {
    shape[dim] = count;
  }
  set_output_raw_strided(0, shape, {}, input.options());
  set_output_raw_strided(1, shape, {}, input.options().dtype(kLong));
}

} // namespace at::meta

namespace at::native {

DEFINE_DISPATCH(topk_stub);

TORCH_IMPL_FUNC(topk_out_cpu)
(const Tensor& input, int64_t count, int64_t along, bool largest, bool sorted, const Tensor& values,
 const Tensor& indices) {
  const int64_t dim = maybe_wrap_dim(along, input.dim(), /*wrap_scalar=*/true);
  if (input.dim() == 0 && input.numel() == 1) {
    // a 0-dim input is its own top-1 entry, at index 0
    values.copy_(input);
    indices.zero_();
  } else if (count > 0) {
    topk_stub(kCPU, values, indices, input, count, dim, largest, sorted);
  }
}

} // namespace at::native
