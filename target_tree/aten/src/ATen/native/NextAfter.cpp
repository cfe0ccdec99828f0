#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/BinaryOps.h>

#include <ATen/core/Tensor.h>
#include <ATen/TensorIterator.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/nextafter_native.h>
#endif

// The CPU kernel of nextafter; its meta function is in FloatingPointMeta.cpp.

namespace at::native {

DEFINE_DISPATCH(nextafter_stub);

TORCH_IMPL_FUNC(nextafter_out) (const Tensor& self, const Tensor& other, const Tensor& result) {
  nextafter_stub(device_type(), *this);
}

} // namespace at::native
