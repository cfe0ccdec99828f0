#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/TensorMeta.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/Functions.h>
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/addmv_meta.h>
#include <ATen/ops/addmv_native.h>
#include <ATen/ops/mv.h>
#endif

// addmv(self, mat, vec, beta, alpha) = beta * self + alpha * (mat @ vec). Only
// the CPU kernel is here; the other backends' kernels (addmv_out_cuda, ...)
// are named differently and live with their backends, outside this tree.

namespace at::meta {

TORCH_META_FUNC(addmv) (const Tensor& self, const Tensor& mat, const Tensor& vec, const Scalar& beta, const Scalar& alpha) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1 && self.dim() <= 1,
              "addmv: expected a matrix, a vector and a vector or number, got ", mat.dim(), "-D, ", vec.dim(),
              "-D and ", self.dim(), "-D");
  TORCH_CHECK(mat.size(1) == vec.size(0) && (mat.size(0) == self.numel() || self.numel() == 1),
              "addmv: size mismatch, mat ", mat.sizes(), ", vec ", vec.sizes(), ", self ", self.sizes());
  set_output_contiguous(0, {mat.size(0)}, vec.options());
}

} // namespace at::meta

namespace at::native {

TORCH_IMPL_FUNC(addmv_out_cpu) (const Tensor& self, const Tensor& mat, const Tensor& vec, const Scalar& beta, const Scalar& alpha, const Tensor& result) {
  // beta == 0 ignores self entirely, NaN and inf included
  Tensor product = at::mv(mat, vec);
  if (beta.toComplexDouble() == 0.0) {
    result.copy_(product.mul_(alpha));
  } else {
    result.copy_(self.mul(beta).add_(product, alpha));
  }
}

} // namespace at::native
