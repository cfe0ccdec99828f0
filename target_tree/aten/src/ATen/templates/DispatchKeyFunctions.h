#include <ATen/core/TensorBody.h>

// Entry header of at::{cpu,cuda,meta,...}:: functions, which call one
// backend's kernel directly, without the dispatcher. The declarations live
// in {DispatchKey}Functions_inl.h; the split keeps TensorBody.h free of an
// include cycle in static-dispatch builds.
${inline_headers}
