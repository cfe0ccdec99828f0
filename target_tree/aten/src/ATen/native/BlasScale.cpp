// Scaling helpers of the slim tree's BLAS-like kernels, in the shape of
// PyTorch's Blas.cpp: when the matrix product is empty, the result is only
// beta * self, computed through the CPU kernel directly (at::cpu::).
#include <ATen/core/Tensor.h>
#include <ATen/CPUFunctions.h>
#include <ATen/Functions.h>

namespace at::native {

// result = beta * self; beta == 0 ignores self entirely (NaNs and infs included).
Tensor& scale_into(Tensor& result, const Tensor& self, const Scalar& beta) {
  if (beta.toComplexDouble() == 0.0) {
    return result.zero_();
  }
  return at::cpu::mul_out(
      // the caller owns result; the kernel only resizes it
      result,
      self,
      at::scalar_tensor(
          beta, self.options() /* the dtype and device of self */));
}

// x * y * z, each product through the CPU kernel.
Tensor triple_product(const Tensor& x, const Tensor& y, const Tensor& z) {
  return at::cpu::mul(x, at::cpu::mul(y, /*other=*/z));
}

// Squares the tensor SELF points to, in place.
Tensor& square_through(Tensor* self) {
  return at::cpu::mul_(*self, *self); // NOLINT(readability-suspicious-call-argument)
}

} // namespace at::native
