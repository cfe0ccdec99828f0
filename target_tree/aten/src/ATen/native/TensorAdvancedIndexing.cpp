#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/TensorAdvancedIndexing.h>

#include <optional>
#include <string_view>

#include <ATen/core/Tensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorMeta.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/ScatterGatherChecks.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/index_add_meta.h>
#include <ATen/ops/index_add_native.h>
#include <ATen/ops/scatter_meta.h>
#include <ATen/ops/scatter_native.h>
#endif

// Writing into a tensor at given indices. scatter's four overloads write a
// tensor or a Scalar, each optionally reduced ('add' or 'multiply', a `str`
// with no default) into what is there. index_add's meta function wraps `dim`
// once and hands it to the impl through its precompute struct
// (`precomputed: dim -> int dim` in the yaml).

namespace at::meta {

namespace {

// The checks all four scatter overloads share, then the output: self's shape and dtype.
void scatter_checks_and_output(
    impl::MetaBase& meta,
    const Tensor& input,
    int64_t dim,
    const Tensor& positions,
    const std::optional<Tensor>& source,
    std::optional<std::string_view> mode) {
  const int64_t wrapped = maybe_wrap_dim(dim, input.dim());
  native::scatter_gather_dtype_check("scatter", input, positions, source);
  native::scatter_shape_check(input, wrapped, positions, source);
  meta.set_output_raw_strided(0, input.sizes(), {}, input.options());
  if (mode.has_value()) {
    TORCH_CHECK(*mode == "add" || *mode == "multiply", "reduce argument must be either add or multiply.");
  }
}

} // namespace

TORCH_META_FUNC2(scatter, src)
(const Tensor& input, int64_t dim, const Tensor& positions, const Tensor& source) {
  scatter_checks_and_output(*this, input, dim, positions, source, std::nullopt);
}

TORCH_META_FUNC2(scatter, value)
(const Tensor& input, int64_t dim, const Tensor& positions, const Scalar& filler) {
  scatter_checks_and_output(*this, input, dim, positions, std::nullopt, std::nullopt);
}

TORCH_META_FUNC2(scatter, reduce)
(const Tensor& input, int64_t dim, const Tensor& positions, const Tensor& source, const std::string_view mode) {
  scatter_checks_and_output(*this, input, dim, positions, source, mode);
}

TORCH_META_FUNC2(scatter, value_reduce)
(const Tensor& input, int64_t dim, const Tensor& positions, const Scalar& filler, const std::string_view mode) {
  scatter_checks_and_output(*this, input, dim, positions, std::nullopt, mode);
}

TORCH_PRECOMPUTE_META_FUNC(index_add)
(const Tensor& input, int64_t dim, const Tensor& positions, const Tensor& source, const Scalar& scale) {
  const int64_t wrapped = maybe_wrap_dim(dim, input.dim());
  TORCH_CHECK_INDEX(positions.dim() <= 1, "index_add_(): Index is supposed to be a vector");
  TORCH_CHECK(positions.scalar_type() == kLong || positions.scalar_type() == kInt,
              "index_add_(): Expected dtype int32/int64 for index but got: ", positions.scalar_type());
  TORCH_CHECK(input.scalar_type() == source.scalar_type(), "index_add_(): self (", input.scalar_type(),
              ") and source (", source.scalar_type(), ") must have the same scalar type");
  set_output_raw_strided(0, input.sizes(), {}, input.options());
  return TORCH_PRECOMPUTE_STRUCT(index_add)().set_dim(wrapped);
}

} // namespace at::meta

namespace at::native {

DEFINE_DISPATCH(scatter_stub);
DEFINE_DISPATCH(scatter_fill_stub);
DEFINE_DISPATCH(scatter_reduce_stub);
DEFINE_DISPATCH(scatter_scalar_reduce_stub);

namespace {

ReductionType scatter_mode(std::string_view mode) {
  return mode == "add" ? ReductionType::SUM : ReductionType::PROD;
}

// out= starts from self's values unless it is self; then the kernel writes at the indices.
void start_from_input(const Tensor& result, const Tensor& input) {
  if (!result.is_same(input)) {
    result.copy_(input);
  }
}

} // namespace

TORCH_IMPL_FUNC(scatter_src_out)
(const Tensor& input, int64_t dim, const Tensor& positions, const Tensor& source, const Tensor& result) {
  start_from_input(result, input);
  if (positions.numel() != 0) {
    scatter_stub(result.device().type(), result, maybe_wrap_dim(dim, input.dim()), positions, source);
  }
}

TORCH_IMPL_FUNC(scatter_value_out)
(const Tensor& input, int64_t dim, const Tensor& positions, const Scalar& filler, const Tensor& result) {
  start_from_input(result, input);
  if (positions.numel() != 0) {
    scatter_fill_stub(result.device().type(), result, maybe_wrap_dim(dim, input.dim()), positions, filler);
  }
}

TORCH_IMPL_FUNC(scatter_reduce_out)
(const Tensor& input,
 int64_t dim,
 const Tensor& positions,
 const Tensor& source,
 const std::string_view mode,
 const Tensor& result) {
  start_from_input(result, input);
  if (positions.numel() != 0) {
    scatter_reduce_stub(
        result.device().type(), result, maybe_wrap_dim(dim, input.dim()), positions, source, scatter_mode(mode));
  }
}

TORCH_IMPL_FUNC(scatter_value_reduce_out)
(const Tensor& input,
 int64_t dim,
 const Tensor& positions,
 const Scalar& filler,
 const std::string_view mode,
 const Tensor& result) {
  start_from_input(result, input);
  if (positions.numel() != 0) {
    scatter_scalar_reduce_stub(
        result.device().type(), result, maybe_wrap_dim(dim, input.dim()), positions, filler, scatter_mode(mode));
  }
}

TORCH_IMPL_FUNC(index_add_cpu_out)
(const Tensor& input, int64_t dim, const Tensor& positions, const Tensor& source, const Scalar& scale, const Tensor& result) {
  // `dim` is the meta function's precomputed, wrapped dimension
  if (!result.is_same(input)) {
    result.copy_(input);
  }
  const Tensor scaled = scale.equal(1) ? source : source.mul(scale);
  for (int64_t i = 0; i < positions.numel(); ++i) {
    const int64_t target = positions.dim() == 0 ? positions.item<int64_t>() : positions[i].item<int64_t>();
    result.select(dim, target).add_(source.dim() == 0 ? scaled : scaled.select(dim, i));
  }
}

} // namespace at::native
