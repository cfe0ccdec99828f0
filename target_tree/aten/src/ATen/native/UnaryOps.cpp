#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/UnaryOps.h>

#include <ATen/core/Tensor.h>
#include <ATen/TensorIterator.h>
#include <ATen/TensorMeta.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/cos_meta.h>
#include <ATen/ops/cos_native.h>
#include <ATen/ops/exp_meta.h>
#include <ATen/ops/exp_native.h>
#include <ATen/ops/neg_meta.h>
#include <ATen/ops/neg_native.h>
#include <ATen/ops/sin_meta.h>
#include <ATen/ops/sin_native.h>
#include <ATen/ops/tan_meta.h>
#include <ATen/ops/tan_native.h>
#endif

// Unary pointwise ops. Most structured unary kernels look alike, so they are
// written once as macros and stamped out per op: the meta half picks the
// result dtype, the impl half runs the op's dispatch stub. An op that needs
// something of its own gets a macro of its own (neg) or is written out.

namespace at::meta {

// Float ops: integer and bool inputs give the default float dtype.
#define UNARY_FLOAT_META(op)                                       \
  TORCH_META_FUNC(op) (const Tensor& self) {                       \
    build_borrowing_unary_float_op(maybe_get_output(), self);      \
  }

UNARY_FLOAT_META(sin)
UNARY_FLOAT_META(cos)
UNARY_FLOAT_META(exp)

// Negating a bool tensor has no meaning (`~` or logical_not invert a mask).
#define UNARY_META_REFUSING_BOOL(op, message)                      \
  TORCH_META_FUNC(op) (const Tensor& self) {                       \
    TORCH_CHECK(self.scalar_type() != kBool, message);             \
    build_borrowing_unary_op(maybe_get_output(), self);            \
  }

UNARY_META_REFUSING_BOOL(neg, "neg: bool tensors are not supported; use logical_not to invert a mask")

#if 0
// tan is not written yet: neither this definition nor the invocation below is compiled.
TORCH_META_FUNC(tan) (const Tensor& self) {
  build_borrowing_unary_float_op(maybe_get_output(), self);
}
UNARY_FLOAT_META(tan)
#endif

} // namespace at::meta

namespace at::native {

DEFINE_DISPATCH(sin_stub);
DEFINE_DISPATCH(cos_stub);
DEFINE_DISPATCH(exp_stub);
DEFINE_DISPATCH(neg_stub);

// The impl of `op` is the kernel `op_out` calling the stub `op_stub`: the names
// are pasted together, and the general form takes them spelled out.
#define UNARY_IMPL_WITH_STUB(kernel, stub)                              \
  TORCH_IMPL_FUNC(kernel) (const Tensor& self, const Tensor& result) {  \
    stub(device_type(), *this);                                         \
  }
#define UNARY_IMPL(op) UNARY_IMPL_WITH_STUB(op##_out, op##_stub)

UNARY_IMPL(sin)
UNARY_IMPL(cos);
UNARY_IMPL(exp)
UNARY_IMPL_WITH_STUB(neg_out, neg_stub)

// Not compiled either: UNARY_IMPL(tan) and
// TORCH_IMPL_FUNC(tan_out) (const Tensor& self, const Tensor& result) { tan_stub(device_type(), *this); }
/* UNARY_IMPL_WITH_STUB(tan_out, tan_stub) */

} // namespace at::native
