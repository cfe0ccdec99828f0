#pragma once

#ifdef TORCH_ASSERT_NO_OPERATORS
#error TensorBody.h declares a method for every operator with a method variant; \
  include <ATen/core/TensorBase.h> if you only need the Tensor data model.    \
  See NOTE: [Tensor vs. TensorBase]
#endif

#include <c10/core/Device.h>
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/Scalar.h>
#include <c10/core/ScalarType.h>
#include <c10/core/Storage.h>
#include <c10/core/SymInt.h>
#include <c10/core/TensorImpl.h>
#include <c10/macros/Export.h>
#include <c10/util/Deprecated.h>
#include <c10/util/MaybeOwned.h>
#include <c10/util/OptionalArrayRef.h>
#include <c10/util/intrusive_ptr.h>
#include <optional>
#include <ATen/core/TensorAccessor.h>
#include <ATen/core/TensorBase.h>

#include <ATen/MethodOperators.h>

namespace at {
class OptionalTensorRef;
class TensorRef;
class Tensor;
using TensorList = ArrayRef<Tensor>;
} // namespace at

namespace at {

// Tensor adds the generated operator methods (t.mul(o), t.add_(o), ...) on
// top of TensorBase, which owns the reference-counted TensorImpl.
class TORCH_API Tensor: public TensorBase {
 protected:
  // Borrowing constructor used by MaybeOwnedTraits<Tensor>.
  explicit Tensor(unsafe_borrow_t, const TensorBase& rhs): TensorBase(unsafe_borrow_t{}, rhs) {}
  friend MaybeOwnedTraits<Tensor>;
  friend OptionalTensorRef;
  friend TensorRef;

 public:
  Tensor() = default;
  explicit Tensor(
      c10::intrusive_ptr<TensorImpl, UndefinedTensorImpl> tensor_impl)
      : TensorBase(std::move(tensor_impl)) {}
  Tensor(const Tensor& tensor) = default;
  Tensor(Tensor&& tensor) = default;
  explicit Tensor(const TensorBase& base): TensorBase(base) {}
  Tensor(TensorBase&& base): TensorBase(std::move(base)) {}

  Tensor& operator=(const TensorBase& x) & {
    TensorBase::operator=(x);
    return *this;
  }
  Tensor& operator=(const Tensor& x) & {
    TensorBase::operator=(x);
    return *this;
  }
  Tensor& operator=(Tensor&& x) & noexcept {
    TensorBase::operator=(std::move(x));
    return *this;
  }

  // Generated: one declaration per method variant in native_functions.yaml.
  ${tensor_method_declarations}

  // Hand-written methods for the entries marked manual_cpp_binding.
  void _backward(TensorList inputs, const std::optional<Tensor>& gradient, std::optional<bool> keep_graph, bool create_graph) const;

  const Tensor& requires_grad_(bool requires_grad = true) const {
    TensorBase::requires_grad_(requires_grad);
    return *this;
  }

  void retain_grad() const;

  // Handy for code that only wants to know whether two handles alias.
  bool shares_impl_with(const TensorBase& other) const noexcept {
    return unsafeGetTensorImpl() == other.unsafeGetTensorImpl();
  }
};

} // namespace at

// Generated: the inline bodies of the methods declared above.
namespace at {
${tensor_method_definitions}
} // namespace at
