#pragma once

${lazy_non_native_ir_inc}

// Lazy tensor IR nodes that have no native_functions.yaml entry.

${namespace_prologue}

${non_native_ir_nodes}

${namespace_epilogue}
