// The generated header nearly every file a bypass compiles reads, and most of what each compile parses (Functions.h
// includes Operators.h: 4 MB of declarations). The compile check (codemod/verify/compile_check.py) precompiles it from
// the headers the tree's torchgen regenerated, once per state of those headers, and force-includes it into every
// compile of the run that it leaves reading the same text (codemod/verify/pch.py).
#include <ATen/Functions.h>
