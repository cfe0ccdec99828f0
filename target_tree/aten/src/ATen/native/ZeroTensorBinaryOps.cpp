// ZeroTensor kernels of the binary ops, in the shape of PyTorch's BinaryOps.cpp:
// the result's shape and dtype come from the op's Meta kernel, reached by
// redispatching the operator with the Meta key alone.
#include <ATen/core/Tensor.h>
#include <ATen/Functions.h>
#include <ATen/Operators.h>

namespace at::native {

Tensor mul_zerotensor(const Tensor& self, const Tensor& other) {
  constexpr c10::DispatchKeySet meta_only(at::DispatchKey::Meta);
  const auto meta_result = at::_ops::mul_Tensor::redispatch(
      meta_only, self.to(at::kMeta), other.to(at::kMeta));
  return at::_efficientzerotensor(
      meta_result.sizes(), meta_result.options().device(self.device()));
}

} // namespace at::native
