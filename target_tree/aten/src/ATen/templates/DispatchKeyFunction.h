#pragma once
// ${generated_comment}

// Per-operator slice of {DispatchKey}Functions.h. Implemented in the
// generated Register{DispatchKey}.cpp.

#include <c10/core/MemoryFormat.h>
#include <c10/core/Scalar.h>
#include <ATen/core/Reduction.h>

// Forward declarations only: this header is reachable from TensorBody.h.
#include <ATen/core/ATen_fwd.h>

namespace at {

namespace ${dispatch_namespace} {

${dispatch_namespaced_declarations}

} // namespace ${dispatch_namespace}
} // namespace at
