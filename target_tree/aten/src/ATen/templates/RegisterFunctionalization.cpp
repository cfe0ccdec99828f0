#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
// ${generated_comment}

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/EmptyTensor.h>
#include <ATen/FunctionalTensorWrapper.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ViewMetaClasses.h>
#include <c10/util/env.h>
#include <torch/library.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/NativeFunctions.h>
#include <ATen/Operators.h>
#else
#include <ATen/ops/empty_strided_native.h>
#include <ATen/ops/expand_copy_ops.h>
#include <ATen/ops/to_ops.h>

$ops_headers
#endif

namespace at {
namespace functionalization {

// Keys to leave out when the functionalization kernels run meta kernels for
// shape and stride inference: no transforms, no modes.
constexpr auto exclude_keys_for_meta_dispatch =
    c10::functorch_transforms_ks |
    c10::DispatchKeySet({
        c10::DispatchKey::FuncTorchDynamicLayerBackMode,
        c10::DispatchKey::FuncTorchDynamicLayerFrontMode,
        c10::DispatchKey::Python,
        c10::DispatchKey::PreDispatch,
    });

// Conservative overlap check: treat "too hard to tell" as no overlap.
inline bool has_internal_overlap_helper(const at::Tensor t) {
  return at::has_internal_overlap(t) == at::MemOverlap::Yes;
}

inline Tensor to_meta(const Tensor& t) {
  if (!t.defined()) {
    return t;
  }
  return at::native::empty_strided_meta_symint(
      t.sym_sizes(), t.sym_strides(),
      /*dtype=*/t.scalar_type(), /*layout=*/t.layout(),
      /*device=*/c10::Device(kMeta), /*pin_memory=*/std::nullopt);
}

inline std::optional<Tensor> to_meta(const std::optional<Tensor>& t) {
  return t.has_value() ? std::optional<Tensor>(to_meta(*t)) : std::nullopt;
}

inline std::vector<Tensor> to_meta(at::ITensorListRef ts) {
  std::vector<Tensor> metas;
  metas.reserve(ts.size());
  for (const auto& t : ts) {
    metas.push_back(to_meta(t));
  }
  return metas;
}

inline c10::List<Tensor> to_meta(const c10::List<Tensor>& ts) {
  c10::List<Tensor> metas;
  metas.reserve(ts.size());
  for (const auto i : c10::irange(ts.size())) {
    metas.push_back(to_meta(ts[i]));
  }
  return metas;
}

inline c10::List<::std::optional<Tensor>> to_meta(const c10::List<::std::optional<Tensor>>& ts) {
  c10::List<::std::optional<Tensor>> metas;
  metas.reserve(ts.size());
  for (const auto i : c10::irange(ts.size())) {
    metas.push_back(to_meta(ts[i]));
  }
  return metas;
}

static bool disable_meta_reference() {
  static const auto flag = c10::utils::get_env("TORCH_DISABLE_FUNCTIONALIZATION_META_REFERENCE");
  return flag == "1";
}


${func_definitions}

}  // namespace functionalization

namespace {

TORCH_LIBRARY_IMPL(aten, Functionalize, m) {
  ${func_registrations};
}

}  // namespace

} // namespace at
