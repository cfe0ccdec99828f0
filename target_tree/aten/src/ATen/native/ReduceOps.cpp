#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/ReduceOps.h>

#include <optional>

#include <ATen/core/Tensor.h>
#include <ATen/NamedTensorUtils.h>
#include <ATen/TensorMeta.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/ReduceOpsUtils.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/Functions.h>
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/cumsum_meta.h>
#include <ATen/ops/cumsum_native.h>
#include <ATen/ops/sum_meta.h>
#include <ATen/ops/sum_native.h>
#endif

// Reductions over dimensions (sum) and scans along one dimension (cumsum):
// the meta half picks the result's shape and dtype, the impl half fills it.

namespace at::meta {

// Integer and bool inputs accumulate in int64 unless a dtype is asked for;
// an out= tensor of its own dtype decides when no dtype is given.
static ScalarType accumulation_dtype(const Tensor& input, std::optional<ScalarType> requested, const Tensor& given_out) {
  if (requested.has_value()) {
    return *requested;
  }
  if (given_out.defined()) {
    return given_out.scalar_type();
  }
  return at::isIntegralType(input.scalar_type(), /*includeBool=*/true) ? kLong : input.scalar_type();
}

TORCH_META_FUNC2(sum, dim_IntList)
(const Tensor& input, OptionalIntArrayRef reduced_dims, bool keep_reduced, std::optional<ScalarType> result_dtype) {
  const auto dtype = accumulation_dtype(input, result_dtype, maybe_get_output());
  resize_reduction(*this, input, reduced_dims, keep_reduced, dtype);
}

// A scan keeps the input's shape; only the dtype can change.
TORCH_META_FUNC(cumsum)
(const Tensor& input, int64_t scan_dim, std::optional<ScalarType> result_dtype) {
  maybe_wrap_dim(scan_dim, input.dim());
  const auto dtype = accumulation_dtype(input, result_dtype, maybe_get_output());
  set_output_raw_strided(0, input.sizes(), {}, input.options().dtype(dtype));
  namedinference::propagate_names(maybe_get_output(), input);
}

} // namespace at::meta

namespace at::native {

DEFINE_DISPATCH(sum_stub);
DEFINE_DISPATCH(cumsum_stub);

TORCH_IMPL_FUNC(sum_out)
(const Tensor& input, OptionalIntArrayRef reduced_dims, bool keep_reduced, std::optional<ScalarType> result_dtype,
 const Tensor& result) {
  auto iter = meta::make_reduction_from_out_ty(input, result, reduced_dims, keep_reduced, result.scalar_type());
  if (iter.numel() == 0) {
    result.zero_();  // the sum over nothing
  } else {
    sum_stub(iter.device_type(), iter);
  }
}

TORCH_IMPL_FUNC(cumsum_out)
(const Tensor& input, int64_t scan_dim, std::optional<ScalarType> result_dtype, const Tensor& result) {
  NoNamesGuard no_names;
  if (input.dim() == 0) {
    result.fill_(input);  // a 0-dim scan is the value itself
  } else if (input.numel() == 0) {
    result.zero_();
  } else {
    // the kernel computes in the result's dtype
    cumsum_stub(input.device().type(), result, input.to(result.scalar_type()), maybe_wrap_dim(scan_dim, input.dim()));
  }
}

} // namespace at::native
