#pragma once

// Used by out-of-tree backends (gen_backend_stubs); kept unformatted.
// clang-format off

// ${generated_comment}

#include <ATen/Tensor.h>

${namespace_prologue}

struct ${class_name} {

${dispatch_declarations}

};
${namespace_epilogue}
