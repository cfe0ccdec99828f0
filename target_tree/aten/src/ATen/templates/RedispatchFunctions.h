#pragma once

// ${generated_comment}

// at::redispatch::<op>(keyset, args...): continue dispatching an operator
// from a given DispatchKeySet (used by kernels that sit above a backend).

#ifdef TORCH_ASSERT_ONLY_METHOD_OPERATORS
#error RedispatchFunctions.h depends on every operator; use                \
  at::_ops::{name}::redispatch() from <ATen/ops/{my_operator}_ops.h>.
#endif

#include <c10/core/Scalar.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/Deprecated.h>
#include <optional>
#include <ATen/Context.h>
#include <ATen/DeviceGuard.h>
#include <ATen/Operators.h>
#include <ATen/Tensor.h>
#include <ATen/TensorUtils.h>
#include <ATen/TracerMode.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Reduction.h>

namespace at {

namespace redispatch {
    ${function_redispatch_definitions}
} // namespace redispatch

} // namespace at
