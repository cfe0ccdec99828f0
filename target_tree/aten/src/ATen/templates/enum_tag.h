#pragma once

// ${generated_comment}

#include <torch/headeronly/macros/Macros.h>

HIDDEN_NAMESPACE_BEGIN(torch, headeronly)

// One enumerator per entry of tags.yaml.
enum class Tag {
    ${enum_of_valid_tags}
};

HIDDEN_NAMESPACE_END(torch, headeronly)

// Older code spells it at::Tag.
namespace at {
    using torch::headeronly::Tag;
}
