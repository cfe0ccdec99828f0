#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/TensorMeta.h>
#include <ATen/core/Reduction.h>

#ifndef AT_PER_OPERATOR_HEADERS
#include <ATen/NativeFunctions.h>
#else
#include <ATen/ops/nll_loss_forward_meta.h>
#include <ATen/ops/nll_loss_forward_native.h>
#endif

// The negative log likelihood of log-probabilities `self` ([N, C] or [C]) at
// the class indices `target`, optionally weighted per class. Two outputs: the
// loss, and the total weight it was normalised by.

namespace at::meta {

TORCH_META_FUNC(nll_loss_forward)
(const Tensor& input,
 const Tensor& classes,
 const OptionalTensorRef class_weights,
 int64_t reduction,
 int64_t ignored) {
  TORCH_CHECK(input.dim() > 0 && input.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(classes.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  const bool unbatched = input.dim() == 1 && classes.dim() == 0;
  TORCH_CHECK(unbatched || input.size(0) == classes.size(0),
              "size mismatch (got input: ", input.sizes(), ", target: ", classes.sizes(), ")");
  const Tensor& weight = class_weights.getTensorRef();
  TORCH_CHECK(!weight.defined() || (weight.dim() == 1 && weight.numel() == input.size(-1)),
              "weight tensor should be defined either for all ", input.size(-1), " classes or no classes");
  if (reduction == Reduction::None && input.dim() == 2) {
    set_output_raw_strided(0, {input.size(0)}, {}, input.options());
  } else {
    set_output_raw_strided(0, {}, {}, input.options());
  }
  set_output_raw_strided(1, {}, {}, input.options());
}

} // namespace at::meta

namespace at::native {

namespace {

// One pass over the batch: each row contributes -weight[c] * input[row][c].
template <typename scalar_t>
void nll_loss_rows(const Tensor& output, const Tensor& total_weight, const Tensor& input, const Tensor& classes,
                   const Tensor& weight, int64_t reduction, int64_t ignored) {
  const Tensor rows = input.dim() == 1 ? input.unsqueeze(0) : input;
  const Tensor labels = classes.dim() == 0 ? classes.unsqueeze(0) : classes;
  const auto values = rows.accessor<const scalar_t, 2>();
  const auto picked = labels.accessor<const int64_t, 1>();
  const scalar_t* per_class = weight.defined() ? weight.const_data_ptr<scalar_t>() : nullptr;
  Tensor losses = input.new_empty({rows.size(0)});
  auto loss = losses.accessor<scalar_t, 1>();
  scalar_t weights_seen = 0;
  for (int64_t row = 0; row < rows.size(0); ++row) {
    const int64_t label = picked[row];
    if (label == ignored) {
      loss[row] = 0;
      continue;
    }
    TORCH_CHECK_INDEX(label >= 0 && label < rows.size(1), "Target ", label, " is out of bounds.");
    const scalar_t w = per_class != nullptr ? per_class[label] : static_cast<scalar_t>(1);
    loss[row] = -values[row][label] * w;
    weights_seen += w;
  }
  total_weight.fill_(weights_seen);
  if (reduction == Reduction::None && input.dim() == 2) {
    output.copy_(losses);
  } else if (reduction == Reduction::Mean) {
    output.fill_(losses.sum().div(weights_seen));
  } else {
    output.fill_(losses.sum());
  }
}

} // namespace

TORCH_IMPL_FUNC(nll_loss_forward_out_cpu)
(const Tensor& input,
 const Tensor& classes,
 const OptionalTensorRef class_weights,
 int64_t reduction,
 int64_t ignored,
 const Tensor& output,
 const Tensor& total_weight) {
  const Tensor& weight = class_weights.getTensorRef();
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "nll_loss_forward_out_cpu", [&] {
    nll_loss_rows<scalar_t>(output, total_weight, input, classes, weight, reduction, ignored);
  });
}

} // namespace at::native
