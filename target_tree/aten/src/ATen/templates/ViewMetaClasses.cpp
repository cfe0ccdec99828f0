// ${generated_comment}

#include <ATen/FunctionalInverses.h>
#include <ATen/ViewMetaClasses.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/NativeFunctions.h>
#include <ATen/Operators.h>
#else
${op_headers}
#endif

namespace at {
namespace functionalization {

${view_meta_implementations}

} // namespace functionalization
} // namespace at
