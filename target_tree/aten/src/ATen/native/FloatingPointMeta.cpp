#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/TensorIterator.h>
#include <ATen/TensorMeta.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/nextafter_meta.h>
#endif

// Meta functions of ops on the representation of floating-point numbers. Their
// kernels live with the code that knows the representation (NextAfter.cpp):
// this file only decides shapes and dtypes.

namespace at::meta {

// nextafter steps from self toward other by one representable number, so it
// is defined for floating dtypes only.
TORCH_META_FUNC(nextafter) (const Tensor& self, const Tensor& other) {
  TORCH_CHECK_TYPE(at::isFloatingType(self.scalar_type()) && at::isFloatingType(other.scalar_type()),
                   "nextafter is defined for floating dtypes only, got ", self.scalar_type(), " and ",
                   other.scalar_type());
  build_borrowing_binary_op(maybe_get_output(), self, other);
}

} // namespace at::meta
