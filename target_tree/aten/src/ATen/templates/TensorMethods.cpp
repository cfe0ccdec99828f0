#include <c10/core/Scalar.h>
#include <ATen/core/TensorBody.h>

#include <string_view>

namespace at {

namespace {

// Raises if `t` does not hold elements of type `expected` (a quantized tensor
// is accepted when its underlying integer type matches).
void expect_scalar_type(const TensorBase& t, ScalarType expected) {
  const ScalarType actual = t.scalar_type();
  const bool ok = actual == expected ||
      (isQIntType(actual) && toUnderlying(actual) == expected);
  TORCH_CHECK(ok, "expected scalar type ", expected, " but found ", actual);
}

} // namespace

template <typename T>
const T* TensorBase::const_data_ptr() const {
  using Elem = std::remove_const_t<T>;
  expect_scalar_type(*this, c10::CppTypeToScalarType<Elem>());
  return unsafeGetTensorImpl()->data_ptr_impl<Elem>();
}

template <typename T>
T* TensorBase::mutable_data_ptr() const {
  expect_scalar_type(*this, c10::CppTypeToScalarType<T>());
  return unsafeGetTensorImpl()->mutable_data_ptr_impl<T>();
}

template <typename T>
T* TensorBase::data_ptr() const {
  return mutable_data_ptr<T>();
}

// Explicit instantiations for every element type ATen supports.
#define INSTANTIATE_DATA_ACCESSORS(T, name)                                  \
  template TORCH_API const T* TensorBase::const_data_ptr<T>() const;         \
  template TORCH_API const T* TensorBase::const_data_ptr<const T>() const;   \
  template TORCH_API T* TensorBase::mutable_data_ptr() const;                \
  template TORCH_API T* TensorBase::data_ptr() const;

AT_FORALL_SCALAR_TYPES_WITH_COMPLEX(INSTANTIATE_DATA_ACCESSORS)
AT_FORALL_QINT_TYPES(INSTANTIATE_DATA_ACCESSORS)
#undef INSTANTIATE_DATA_ACCESSORS

} //namespace at
