#pragma once

// ${generated_comment}

#ifdef TORCH_ASSERT_NO_OPERATORS
#error MethodOperators.h depends on every method in native_functions.yaml. \
  See NOTE: [Tensor vs. TensorBase]
#endif

// Forward declarations only: this header is included by TensorBody.h.
#include <ATen/core/ATen_fwd.h>

${MethodOperators_includes}

namespace at {
namespace _ops {
${MethodOperators_declarations}
} // namespace _ops
} // namespace at
