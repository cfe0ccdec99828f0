#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
// ${generated_comment}

#include <ATen/InferSize.h>
#include <ATen/Tensor.h>
#include <ATen/native/Resize.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/Operators.h>
#else
#include <ATen/ops/clone.h>
$ops_headers
#endif

namespace at {
namespace native {

// Kernels written entirely by torchgen: *_copy variants of views, and the
// functional / out= variants requested with `autogen:`.

namespace {
at::Tensor clone_arg(const at::Tensor& t) {
  return t.clone();
}

std::vector<at::Tensor> clone_arg(const at::TensorList& ts) {
  std::vector<at::Tensor> cloned;
  cloned.reserve(ts.size());
  for (const auto& t : ts) {
    cloned.push_back(t.clone());
  }
  return cloned;
}

void copy_arg(const at::Tensor& dst, const at::Tensor& src) {
  TORCH_CHECK(src.dtype() == dst.dtype(), "out= has dtype ", dst.dtype(), ", expected ", src.dtype());
  TORCH_CHECK(src.device() == dst.device(), "out= is on ", dst.device(), ", expected ", src.device());
  dst.copy_(src);
}

void copy_arg(const at::TensorList& dst, const at::TensorList& src) {
  TORCH_INTERNAL_ASSERT(dst.size() == src.size());
  for (const auto i : c10::irange(dst.size())) {
    copy_arg(dst[i], src[i]);
  }
}

void resize_out_helper(const at::Tensor& dst, const at::Tensor& src) {
  at::native::resize_output(dst, src.sizes());
}

void resize_out_helper(const at::TensorList& dst, const at::TensorList& src) {
  TORCH_INTERNAL_ASSERT(dst.size() == src.size());
  for (const auto i : c10::irange(dst.size())) {
    at::native::resize_output(dst[i], src[i].sizes());
  }
}
} // namespace


${CompositeViewCopyKernel_Definitions}

${GeneratedCompositeFunctional_Definitions}

${GeneratedCompositeOut_Definitions}

} // namespace native
} // namespace at
