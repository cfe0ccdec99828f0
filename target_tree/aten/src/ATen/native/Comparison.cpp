#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/BinaryOps.h>

#include <ATen/core/Tensor.h>
#include <ATen/ScalarOps.h>
#include <ATen/TensorIterator.h>
#include <ATen/TensorMeta.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/eq_meta.h>
#include <ATen/ops/eq_native.h>
#include <ATen/ops/lt_meta.h>
#include <ATen/ops/lt_native.h>
#endif

// Comparisons: each op has a Tensor and a Scalar overload, both structured,
// both giving a bool result (or the dtype of a given `out=`). One macro writes
// the two meta functions of an op, another the two impls.

namespace at::meta {

#define COMPARISON_META(op)                                                       \
  TORCH_META_FUNC2(op, Tensor) (const Tensor& self, const Tensor& other) {        \
    build_borrowing_comparison_op(maybe_get_output(), self, other);               \
  }                                                                               \
  TORCH_META_FUNC2(op, Scalar) (const Tensor& self, const Scalar& other) {        \
    /* the number takes part in type promotion as a wrapped 0-dim tensor */       \
    build_borrowing_except_last_argument_comparison_op(                           \
        maybe_get_output(), self, native::wrapped_scalar_tensor(other));          \
  }

COMPARISON_META(eq);
COMPARISON_META(lt);

} // namespace at::meta

namespace at::native {

DEFINE_DISPATCH(eq_stub);
DEFINE_DISPATCH(lt_stub);

// Both overloads run the same stub: the meta function made `other` a tensor.
#define COMPARISON_IMPL(op)                                                        \
  TORCH_IMPL_FUNC(op##_Tensor_out)                                                 \
  (const Tensor& self, const Tensor& other, const Tensor& result) {                \
    op##_stub(device_type(), *this);                                               \
  }                                                                                \
  TORCH_IMPL_FUNC(op##_Scalar_out)                                                 \
  (const Tensor& self, const Scalar& other, const Tensor& result) {                \
    op##_stub(device_type(), *this);                                               \
  }

COMPARISON_IMPL(eq);
COMPARISON_IMPL(lt);

} // namespace at::native
