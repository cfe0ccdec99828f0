#pragma once

// ${generated_comment}

#include <ATen/FunctionalStorageImpl.h>
#include <ATen/Tensor.h>

namespace at {
namespace functionalization {

struct FunctionalInverses {

${view_inverse_declarations}

// Written by hand (multi-output views the codegen cannot describe yet).
static at::Tensor chunk_inverse(const at::Tensor & base, const at::Tensor & mutated_view, InverseReturnMode inverse_return_mode, int64_t mutated_view_idx, int chunks, int dim);
static at::Tensor narrow_inverse(const at::Tensor & base, const at::Tensor & mutated_view, InverseReturnMode inverse_return_mode, int dim, c10::SymInt start, c10::SymInt length);

};
} // namespace functionalization
} // namespace at
