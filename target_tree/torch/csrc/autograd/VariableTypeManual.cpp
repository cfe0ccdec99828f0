#include <ATen/RedispatchFunctions.h>
#include <ATen/core/TorchDispatchUtils.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/util/irange.h>
#include <torch/csrc/autograd/VariableTypeUtils.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/library.h>

// Hand-written parts of the autograd layer (slim). Kernels registered at the
// Autograd key receive the dispatch key set and continue below autograd with
// at::redispatch::<op>(ks & after_autograd_keyset, ...).

namespace torch::autograd::VariableType {

namespace {

// In the helpers below `ks` has already been restricted to the keys below
// autograd (ks & c10::after_autograd_keyset), so the calls skip this layer.

// self * other + alpha * bias
at::Tensor scaled_product_plus(
    c10::DispatchKeySet ks,
    const at::Tensor& self,
    const at::Tensor& other,
    const at::Tensor& bias,
    const at::Scalar& alpha) {
  at::Tensor product = at::redispatch::mul(ks, self, other);
  return at::redispatch::add(ks, product, bias, alpha);
}

at::Tensor square(c10::DispatchKeySet ks, const at::Tensor& t) {
  return at::redispatch::mul(ks, t, t);
}

} // namespace

// Gradient of sum((self * other + alpha * bias)^2) w.r.t. self, written out by
// hand: 2 * (self * other + alpha * bias) * other.
at::Tensor fused_square_grad_self(
    c10::DispatchKeySet ks,
    const at::Tensor& self,
    const at::Tensor& other,
    const at::Tensor& bias,
    const at::Scalar& alpha) {
  const auto below = ks & c10::after_autograd_keyset;
  at::Tensor inner = scaled_product_plus(below, self, other, bias, alpha);
  at::Tensor doubled = at::redispatch::add(below, inner, inner, /*alpha=*/1);
  return at::redispatch::mul(below, doubled, other);
}

at::Tensor squared(c10::DispatchKeySet ks, const at::Tensor& t) {
  return square(ks & c10::after_autograd_keyset, t);
}

} // namespace torch::autograd::VariableType
