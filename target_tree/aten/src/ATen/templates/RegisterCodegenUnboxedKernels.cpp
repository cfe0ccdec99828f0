#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/csrc/jit/runtime/register_ops_utils.h>

#include <ATen/UnboxingFunctions.h>

// ${generated_comment}

// Written by gen_unboxing: registers every ATen op with the JIT operator
// registry, using the codegen'd unboxing wrappers of UnboxingFunctions.h.

namespace torch { namespace jit {

using at::Scalar;
using at::ScalarType;
using at::Tensor;
using at::TensorOptions;

namespace {

RegisterOperators reg({

    ${unboxed_ops}
});

} // namespace

}} // namespace torch::jit
