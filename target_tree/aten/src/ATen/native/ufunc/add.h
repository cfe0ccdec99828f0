#pragma once
// Inner loops of add.out for the ufunc codegen (`ufunc_inner_loop: add` in
// native_functions.yaml): the generated UfuncCPUKernel_add.cpp calls the scalar
// form per element and the Vectorized form per vector, out = self + alpha * other.

#include <c10/macros/Macros.h>

#if !defined(__CUDACC__) && !defined(__HIPCC__)
#include <ATen/cpu/vec/vec.h>
#endif

namespace at::native::ufunc {

template <typename T>
C10_HOST_DEVICE C10_ALWAYS_INLINE T add(T self, T other, T alpha) {
  return self + alpha * other;
}

#if !defined(__CUDACC__) && !defined(__HIPCC__)
template <typename T>
C10_ALWAYS_INLINE vec::Vectorized<T> add(vec::Vectorized<T> self, vec::Vectorized<T> other, vec::Vectorized<T> alpha) {
  return vec::fmadd(other, alpha, self);
}
#endif

} // namespace at::native::ufunc
