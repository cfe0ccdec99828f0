#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/TensorCompare.h>

#include <ATen/core/Tensor.h>
#include <ATen/TensorIterator.h>
#include <ATen/TensorMeta.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/clamp_meta.h>
#include <ATen/ops/clamp_native.h>
#endif

// clamp with bounds given as optional Scalars (clamp.out) or as optional
// tensors that broadcast with self (clamp.Tensor_out). Both overloads take
// (self, min, max): only the bounds' types tell them apart.

namespace at::meta {

TORCH_META_FUNC(clamp)
(const Tensor& input, const OptionalScalarRef lower, const OptionalScalarRef upper) {
  TORCH_CHECK(lower || upper, "torch.clamp: At least one of 'min' or 'max' must not be None");
  build_borrowing_unary_op(maybe_get_output(), input);
}

TORCH_META_FUNC2(clamp, Tensor)
(const Tensor& input, const OptionalTensorRef lower, const OptionalTensorRef upper) {
  TORCH_CHECK(lower || upper, "torch.clamp: At least one of 'min' or 'max' must not be None");
  TORCH_CHECK(!isComplexType(input.scalar_type()), "clamp is not supported for complex types");
  // the bounds broadcast with the input and take part in type promotion
  TensorIteratorConfig config;
  config.set_check_mem_overlap(true).add_output(maybe_get_output()).add_const_input(input);
  if (lower) {
    config.add_const_input(*lower);
  }
  if (upper) {
    config.add_const_input(*upper);
  }
  config.promote_inputs_to_common_dtype(true).cast_common_dtype_to_outputs(true).enforce_safe_casting_to_output(true);
  build(config);
}

} // namespace at::meta

namespace at::native {

DEFINE_DISPATCH(clamp_stub);
DEFINE_DISPATCH(clamp_scalar_stub);
DEFINE_DISPATCH(clamp_min_scalar_stub);
DEFINE_DISPATCH(clamp_max_scalar_stub);

TORCH_IMPL_FUNC(clamp_out)
(const Tensor& input, const OptionalScalarRef lower, const OptionalScalarRef upper, const Tensor& result) {
  if (lower && upper) {
    clamp_scalar_stub(device_type(), *this, lower.get(), upper.get());
  } else if (upper) {
    clamp_max_scalar_stub(device_type(), *this, upper.get());
  } else {
    clamp_min_scalar_stub(device_type(), *this, lower.get());
  }
}

TORCH_IMPL_FUNC(clamp_Tensor_out)
(const Tensor& input, const OptionalTensorRef lower, const OptionalTensorRef upper, const Tensor& result) {
  clamp_stub(device_type(), *this);
}

} // namespace at::native
