#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
// ${generated_comment}

#include <ATen/FunctionalStorageImpl.h>

namespace at {
namespace functionalization {

${view_meta_declarations}

} // namespace functionalization
} // namespace at
