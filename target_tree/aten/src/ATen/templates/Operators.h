#pragma once

// ${generated_comment}

#ifdef TORCH_ASSERT_NO_OPERATORS
#error Operators.h depends on every operator in native_functions.yaml. \
  See NOTE: [Tensor vs. TensorBase]
#endif

#if defined(AT_PER_OPERATOR_HEADERS) && defined(TORCH_ASSERT_ONLY_METHOD_OPERATORS)
#error Include the operator you need from <ATen/ops/{my_operator}_ops.h> \
  instead of Operators.h.
#endif

#include <c10/core/QScheme.h>
#include <c10/core/Scalar.h>
#include <c10/core/SymInt.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/OptionalArrayRef.h>
#include <tuple>
#include <vector>

${Operators_includes}

// at::_ops::<op>_<overload> is one struct per schema with static call() and
// redispatch(). Prefer the macros below to naming those structs directly.
//   ATEN_FN2(mul, Tensor)  -> a plain function for aten::mul.Tensor
//   ATEN_OP2(mul, Tensor)  -> the struct itself (name, overload_name, schema)
#define ATEN_FN2(op_name, overload) at::_ops::op_name##_##overload::call
#define ATEN_FN(op_name) at::_ops::op_name::call

#define ATEN_OP2(op_name, overload) at::_ops::op_name##_##overload
#define ATEN_OP(op_name) at::_ops::op_name

namespace at {
namespace _ops {
${Operators_declarations}
} // namespace _ops
} // namespace at
