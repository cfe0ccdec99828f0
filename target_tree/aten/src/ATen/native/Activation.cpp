#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/Activation.h>

#include <string_view>

#include <ATen/core/Tensor.h>
#include <ATen/TensorIterator.h>
#include <ATen/TensorMeta.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/gelu_meta.h>
#include <ATen/ops/gelu_native.h>
#endif

// gelu(x) = x * Phi(x), exact ('none') or through tanh ('tanh'): the mode is a
// `str` argument with a default, read once by the impl.

namespace at::meta {

TORCH_META_FUNC(gelu)(const Tensor& input, std::string_view mode) {
  // elementwise: the result takes the input's shape and floating dtype
  build_unary_op(maybe_get_output(), input);
}

} // namespace at::meta

namespace at::native {

DEFINE_DISPATCH(GeluKernel);

TORCH_IMPL_FUNC(gelu_out_cpu)(const Tensor& input, std::string_view mode, const Tensor& result) {
  // an unknown mode is refused here, before any element is computed
  const GeluType kind = get_gelutype_enum(mode);
  GeluKernel(kCPU, *this, kind);
}

} // namespace at::native
