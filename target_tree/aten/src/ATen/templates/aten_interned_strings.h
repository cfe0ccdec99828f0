#pragma once

// ${generated_comment}

#if defined(TORCH_ASSERT_NO_OPERATORS) || defined(TORCH_ASSERT_ONLY_METHOD_OPERATORS)
#error aten_interned_strings.h lists every operator in native_functions.yaml; \
  <ATen/core/symbol.h> is usually enough.
#endif

// One interned symbol per ATen operator name, and one per argument name.

#define FORALL_ATEN_BASE_SYMBOLS(_) \
${aten_symbols}

#define FORALL_ATTR_BASE_SYMBOLS(_) \
${attr_symbols}
