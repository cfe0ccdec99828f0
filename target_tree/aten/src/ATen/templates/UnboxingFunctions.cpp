#include <ATen/UnboxingFunctions.h>
#include <ATen/Functions.h>

#include <ATen/Tensor.h>
#include <ATen/core/functional.h>
#include <ATen/core/interned_strings.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>

#include <vector>

namespace at {
namespace unboxing {

using torch::jit::drop;
using torch::jit::pack;
using torch::jit::peek;
using torch::jit::pop;

${definitions}

} // namespace unboxing
} // namespace at
