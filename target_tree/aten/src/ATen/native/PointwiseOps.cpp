#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/PointwiseOps.h>

#include <ATen/core/Tensor.h>
#include <ATen/TensorIterator.h>
#include <ATen/TensorMeta.h>

// Per-operator headers whatever the build, as in forks that dropped the monolithic NativeFunctions.h branch
// (`#ifndef AT_PER_OPERATOR_HEADERS`): the native header brings the structured op's meta struct with it.
#include <ATen/ops/addcmul_native.h>

// Pointwise ops of three tensors and a Scalar: self + value * tensor1 * tensor2.

namespace at::meta {

TORCH_META_FUNC(addcmul)
(const Tensor& input, const Tensor& factor1, const Tensor& factor2, const Scalar& scale) {
  // the three inputs broadcast together and promote to one dtype, as a binary op's two do
  build_ternary_op(maybe_get_output(), input, factor1, factor2);
}

} // namespace at::meta

namespace at::native {

DEFINE_DISPATCH(addcmul_stub);

TORCH_IMPL_FUNC(addcmul_out)
(const Tensor& input, const Tensor& factor1, const Tensor& factor2, const Scalar& scale, const Tensor& result) {
  addcmul_stub(device_type(), *this, scale);
}

} // namespace at::native
