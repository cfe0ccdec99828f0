#pragma once

// ${generated_comment}

#include <string_view>
#include <tuple>
#include <vector>

// Forward declarations only: this header is reachable from TensorBody.h.
#include <ATen/core/ATen_fwd.h>

namespace at {
namespace _ops {

${declarations}

}} // namespace at::_ops
