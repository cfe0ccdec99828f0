#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/Lerp.h>

#include <ATen/core/Tensor.h>
#include <ATen/TensorIterator.h>
#include <ATen/TensorMeta.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/lerp_meta.h>
#include <ATen/ops/lerp_native.h>
#endif

// lerp(self, end, weight) = self + weight * (end - self), with a Scalar or a
// Tensor weight. Its CPU kernels are named after the functional overloads
// (`lerp_Scalar` for lerp.Scalar), so the meta struct at::meta::structured_lerp_Scalar
// and the native struct at::native::structured_lerp_Scalar share one name.

namespace at::meta {

namespace {

// No type promotion: the inputs interpolate in the dtype they share.
void check_same_dtype(const char* what, const Tensor& self, const Tensor& other) {
  TORCH_CHECK(self.dtype() == other.dtype(), "lerp: expected ", what, " of dtype ", self.dtype(),
              " but got ", other.dtype());
}

} // namespace

TORCH_META_FUNC2(lerp, Scalar) (const Tensor& self, const Tensor& end, const Scalar& weight) {
  check_same_dtype("end", self, end);
  TensorIteratorConfig config;
  config.add_output(maybe_get_output()).add_const_input(self).add_const_input(end);
  build(config);
}

TORCH_META_FUNC2(lerp, Tensor) (const Tensor& self, const Tensor& end, const Tensor& weight) {
  check_same_dtype("end", self, end);
  check_same_dtype("weight", self, weight);
  TensorIteratorConfig config;
  config.add_output(maybe_get_output()).add_const_input(self).add_const_input(end).add_const_input(weight);
  build(config);
}

} // namespace at::meta

namespace at::native {

DEFINE_DISPATCH(lerp_kernel_scalar_weight);
DEFINE_DISPATCH(lerp_kernel_tensor_weight);

TORCH_IMPL_FUNC(lerp_Scalar) (const Tensor& self, const Tensor& end, const Scalar& weight, const Tensor& out) {
  lerp_kernel_scalar_weight(device_type(), *this, weight);
}

TORCH_IMPL_FUNC(lerp_Tensor) (const Tensor& self, const Tensor& end, const Tensor& weight, const Tensor& out) {
  lerp_kernel_tensor_weight(device_type(), *this);
}

} // namespace at::native
