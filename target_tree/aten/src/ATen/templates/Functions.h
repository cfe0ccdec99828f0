#pragma once

// ${generated_comment}

// The at:: function API: one inline function per operator overload, each
// forwarding to at::_ops::<op>::call (i.e. through the dispatcher).

#ifdef TORCH_ASSERT_NO_OPERATORS
#error Including Functions.h makes this file depend on every operator in \
  native_functions.yaml; include a narrower header instead.              \
  See NOTE: [Tensor vs. TensorBase]
#endif

#if defined(AT_PER_OPERATOR_HEADERS) && defined(TORCH_ASSERT_ONLY_METHOD_OPERATORS)
#error Including Functions.h pulls in every operator; include the header of \
  the operator you need from <ATen/ops/{my_operator}.h> instead.
#endif

#include <ATen/Context.h>
#include <ATen/DeviceGuard.h>
#include <ATen/TensorUtils.h>
#include <ATen/TracerMode.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Reduction.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/core/Storage.h>
#include <c10/core/SymInt.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/Deprecated.h>
#include <c10/util/OptionalArrayRef.h>
#include <optional>

#include <ATen/ops/from_blob.h>
#include <ATen/ops/tensor.h>

${Functions_includes}

namespace at {

${Functions_declarations}

// Hand-written free-function spellings of a few Tensor queries, so that
// generic code can write at::numel(t) next to at::mul(a, b).
inline int64_t numel(const Tensor& tensor) {
  return tensor.numel();
}

inline int64_t size(const Tensor& tensor, int64_t dim) {
  return tensor.size(dim);
}

inline bool is_complex(const Tensor& tensor) {
  return tensor.is_complex();
}

inline bool is_floating_point(const Tensor& tensor) {
  return tensor.is_floating_point();
}

} // namespace at
