#pragma once

// ${generated_comment}

// Declarations of the at::native:: kernels named in native_functions.yaml,
// including the structured_* classes that TORCH_IMPL_FUNC defines into.

#ifdef TORCH_ASSERT_NO_OPERATORS
#error NativeFunctions.h depends on every operator in native_functions.yaml. \
  See NOTE: [Tensor vs. TensorBase]
#endif

#if defined(AT_PER_OPERATOR_HEADERS) && defined(TORCH_ASSERT_ONLY_METHOD_OPERATORS)
#error Include the operator you need from <ATen/ops/{my_operator}_native.h> \
  instead of NativeFunctions.h.
#endif

#include <c10/core/QScheme.h>
#include <c10/core/Scalar.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/Deprecated.h>
#include <optional>
#include <ATen/core/Reduction.h>
#include <ATen/core/Tensor.h>
#include <tuple>
#include <vector>

${NativeFunctions_includes}

${NativeFunctions_declarations}
