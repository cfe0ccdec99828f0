#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/BinaryOps.h>

#include <optional>
#include <string_view>

#include <ATen/core/Tensor.h>
#include <ATen/ScalarOps.h>
#include <ATen/TensorIterator.h>
#include <ATen/TensorMeta.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/Functions.h>
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/add.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/atan2_meta.h>
#include <ATen/ops/atan2_native.h>
#include <ATen/ops/copysign.h>
#include <ATen/ops/copysign_meta.h>
#include <ATen/ops/copysign_native.h>
#include <ATen/ops/div.h>
#include <ATen/ops/div_meta.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/fmax_meta.h>
#include <ATen/ops/fmax_native.h>
#include <ATen/ops/hypot_meta.h>
#include <ATen/ops/hypot_native.h>
#include <ATen/ops/maximum_meta.h>
#include <ATen/ops/maximum_native.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/mul_meta.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/multiply_native.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sub_meta.h>
#include <ATen/ops/sub_native.h>
#include <ATen/ops/subtract_native.h>
#endif

// Binary arithmetic: the meta (shape/dtype) and impl (compute) halves of the
// structured kernels for add / sub / mul / div and for the binary math ops
// atan2 / hypot / maximum / fmax / copysign, and the hand-written Scalar
// overloads and aliases that route back into them.

namespace at::meta {

namespace {

// div(..., rounding_mode=) accepts no mode (true division), "trunc" or "floor".
bool is_rounding_division(std::optional<std::string_view> rounding_mode) {
  if (!rounding_mode.has_value()) {
    return false;
  }
  TORCH_CHECK(
      *rounding_mode == "trunc" || *rounding_mode == "floor",
      "div expected rounding_mode to be one of None, 'trunc', or 'floor' "
      "but found '", *rounding_mode, "'");
  return true;
}

// maximum and fmax pick one of two values by order, which complex numbers lack.
void check_not_complex(const char* op, const Tensor& self, const Tensor& other) {
  TORCH_CHECK(!self.is_complex() && !other.is_complex(), op, " not implemented for complex tensors.");
}

} // namespace

TORCH_META_FUNC2(add, Tensor) (
  const Tensor& self, const Tensor& other, const Scalar& alpha
) {
  build_borrowing_binary_op(maybe_get_output(), self, other);
  native::alpha_check(dtype(), alpha);
}

TORCH_META_FUNC2(sub, Tensor) (
  const Tensor& self, const Tensor& other, const Scalar& alpha
) {
  native::sub_check(self, other);
  build_borrowing_binary_op(maybe_get_output(), self, other);
  native::alpha_check(dtype(), alpha);
}

TORCH_META_FUNC2(mul, Tensor) (
  const Tensor& self, const Tensor& other
) {
  build_borrowing_binary_op(maybe_get_output(), self, other);
}

TORCH_META_FUNC2(div, Tensor) (const Tensor& self, const Tensor& other) {
  // true division always produces a floating (or complex) result
  build_borrowing_binary_float_op(maybe_get_output(), self, other);
}

TORCH_META_FUNC2(div, Tensor_mode) (
  const Tensor& self, const Tensor& other, std::optional<std::string_view> rounding_mode
) {
  if (is_rounding_division(rounding_mode)) {
    // rounded division keeps the promoted input dtype, integers included
    build_borrowing_binary_op(maybe_get_output(), self, other);
  } else {
    build_borrowing_binary_float_op(maybe_get_output(), self, other);
  }
}

// atan2 and copysign give a float result for integer inputs, like true division.
TORCH_META_FUNC(atan2) (const Tensor& self, const Tensor& other) {
  build_borrowing_binary_float_op(maybe_get_output(), self, other);
}

TORCH_META_FUNC2(copysign, Tensor) (const Tensor& self, const Tensor& other) {
  build_borrowing_binary_float_op(maybe_get_output(), self, other);
}

// hypot keeps the promoted dtype: its CPU kernel has no integer instance.
TORCH_META_FUNC(hypot) (const Tensor& self, const Tensor& other) {
  build_borrowing_binary_op(maybe_get_output(), self, other);
}

TORCH_META_FUNC(maximum) (const Tensor& self, const Tensor& other) {
  check_not_complex("maximum", self, other);
  build_borrowing_binary_op(maybe_get_output(), self, other);
}

// fmax differs from maximum only in its kernel: a NaN loses to a number.
TORCH_META_FUNC(fmax) (const Tensor& self, const Tensor& other) {
  check_not_complex("fmax", self, other);
  build_borrowing_binary_op(maybe_get_output(), self, other);
}

} // namespace at::meta

namespace at::native {

DEFINE_DISPATCH(add_clamp_stub);
DEFINE_DISPATCH(sub_stub);
DEFINE_DISPATCH(mul_stub);
DEFINE_DISPATCH(div_true_stub);
DEFINE_DISPATCH(div_floor_stub);
DEFINE_DISPATCH(div_trunc_stub);
DEFINE_DISPATCH(remainder_stub);
DEFINE_DISPATCH(atan2_stub);
DEFINE_DISPATCH(hypot_stub);
DEFINE_DISPATCH(maximum_stub);
DEFINE_DISPATCH(fmax_stub);
DEFINE_DISPATCH(copysign_stub);

// add.out has no TORCH_IMPL_FUNC here: it is a ufunc (see `ufunc_inner_loop`
// in native_functions.yaml), so torchgen writes structured_ufunc_add_CPU /
// structured_ufunc_add_CUDA and their kernels into UfuncCPU_add.cpp etc.

TORCH_IMPL_FUNC(sub_out) (
  const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& result
) {
  add_stub(device_type(), *this, -alpha);  // sub is add with -alpha: one kernel for both
  TORCH_INTERNAL_ASSERT(result.scalar_type() == output().dtype());
}

TORCH_IMPL_FUNC(mul_out) (
  const Tensor& self, const Tensor& other, const Tensor& result
) {
  mul_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(div_out) (const Tensor& self, const Tensor& other, const Tensor& result) {
  div_true_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(div_out_mode) (
  const Tensor& self, const Tensor& other, std::optional<std::string_view> rounding_mode, const Tensor& result
) {
  // the meta function has already rejected unknown modes
  if (!rounding_mode.has_value()) {
    div_true_stub(device_type(), *this);
  } else if (*rounding_mode == "trunc") {
    div_trunc_stub(device_type(), *this);
  } else {
    div_floor_stub(device_type(), *this);
  }
}

// The meta functions above chose the result dtype; each kernel only computes.
TORCH_IMPL_FUNC(atan2_out) (const Tensor& self, const Tensor& other, const Tensor& result) {
  atan2_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(hypot_out) (const Tensor& self, const Tensor& other, const Tensor& result) {
  hypot_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(maximum_out) (const Tensor& self, const Tensor& other, const Tensor& result) {
  maximum_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(fmax_out) (const Tensor& self, const Tensor& other, const Tensor& result) {
  fmax_stub(device_type(), *this);
}

TORCH_IMPL_FUNC(copysign_out) (const Tensor& self, const Tensor& other, const Tensor& result) {
  copysign_stub(device_type(), *this);
}

// ---------------------------------------------------------------------------
// Scalar overloads (C++ API only). Each wraps the number in a 0-dim
// "wrapped number" tensor, which type promotion treats like a Python scalar,
// and calls the Tensor overload through the dispatcher again.
// ---------------------------------------------------------------------------

Tensor add(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return at::add(self, wrapped_scalar_tensor(other), alpha);
}

Tensor& add_(Tensor& self, const Scalar& other, const Scalar& alpha) {
  return self.add_(wrapped_scalar_tensor(other), alpha);
}

Tensor sub(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return at::sub(self, wrapped_scalar_tensor(other), alpha);
}

Tensor& sub_(Tensor& self, const Scalar& other, const Scalar& alpha) {
  return self.sub_(wrapped_scalar_tensor(other), alpha);
}

Tensor mul(const Tensor& self, const Scalar& other) {
  return at::mul(self, wrapped_scalar_tensor(other));
}

Tensor& mul_(Tensor& self, const Scalar& other) {
  return at::mul_out(self, self, wrapped_scalar_tensor(other));
}

Tensor div(const Tensor& self, const Scalar& other) {
  return self.div(wrapped_scalar_tensor(other));
}

Tensor& div_(Tensor& self, const Scalar& other) {
  return self.div_(wrapped_scalar_tensor(other));
}

Tensor div(const Tensor& self, const Scalar& other, std::optional<std::string_view> rounding_mode) {
  return self.div(wrapped_scalar_tensor(other), rounding_mode);
}

Tensor& div_(Tensor& self, const Scalar& other, std::optional<std::string_view> rounding_mode) {
  return self.div_(wrapped_scalar_tensor(other), rounding_mode);
}

Tensor copysign(const Tensor& self, const Scalar& other) {
  return at::copysign(self, wrapped_scalar_tensor(other));
}

Tensor& copysign_(Tensor& self, const Scalar& other) {
  return self.copysign_(wrapped_scalar_tensor(other));
}

Tensor& copysign_out(const Tensor& self, const Scalar& other, Tensor& result) {
  return at::copysign_out(result, self, wrapped_scalar_tensor(other));
}

// ---------------------------------------------------------------------------
// Aliases (CompositeImplicitAutograd): multiply -> mul, subtract -> sub.
// ---------------------------------------------------------------------------

Tensor& multiply_out(const Tensor& self, const Tensor& other, Tensor& result) {
  return at::mul_out(result, self, other);
}

Tensor multiply(const Tensor& self, const Tensor& other) {
  return self.mul(other);
}

Tensor& multiply_(Tensor& self, const Tensor& other) {
  return self.mul_(other);
}

Tensor multiply(const Tensor& self, const Scalar& other) {
  return self.mul(other);
}

Tensor& multiply_(Tensor& self, const Scalar& other) {
  return self.mul_(other);
}

Tensor& subtract_out(const Tensor& self, const Tensor& other, const Scalar& alpha, Tensor& result) {
  return at::sub_out(result, self, other, alpha);
}

Tensor subtract(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return self.sub(other, alpha);
}

Tensor& subtract_(Tensor& self, const Tensor& other, const Scalar& alpha) {
  return self.sub_(other, alpha);
}

Tensor subtract(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return self.sub(other, alpha);
}

Tensor& subtract_(Tensor& self, const Scalar& other, const Scalar& alpha) {
  return self.sub_(other, alpha);
}

} // namespace at::native
