#pragma once
// ${generated_comment}

// NB: implemented in the generated Register{DispatchKey}.cpp

#include <c10/core/MemoryFormat.h>
#include <c10/core/Scalar.h>
#include <ATen/core/Reduction.h>

#if defined(AT_PER_OPERATOR_HEADERS) && defined(TORCH_ASSERT_ONLY_METHOD_OPERATORS)
#error This header declares every operator of one backend; include         \
  <ATen/ops/{my_operator}_${dispatch_namespace}_dispatch.h> instead.
#endif

${DispatchKeyFunctions_inl_includes}


${dispatch_namespaced_declarations}
