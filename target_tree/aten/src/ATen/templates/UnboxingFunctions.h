// ${generated_comment}

// Written by gen_unboxing: one boxed wrapper per operator that pops IValues
// off a stack, converts them to C++ arguments and calls the unboxed API.

#pragma once

#include <ATen/ATen.h>
namespace at {
namespace unboxing {
using Stack = std::vector<c10::IValue>;

${declarations}

} // namespace unboxing
} // namespace at
