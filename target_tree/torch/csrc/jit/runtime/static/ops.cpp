#include <torch/csrc/jit/runtime/static/ops.h>

#include <ATen/CPUFunctions.h>
#include <ATen/core/ivalue.h>
#include <c10/util/irange.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/static/impl.h>

// Out-variant kernels of the static runtime (slim). Each functor checks the
// node's schema once, then returns a closure that runs the CPU kernel
// directly through at::cpu::, reusing the output tensor from the previous
// iteration when there is one.

namespace torch::jit {

C10_DEFINE_REGISTRY(SROperatorRegistry, SROperatorFunctor);

namespace {

// The previous run's output, emptied so the kernel can resize it freely.
at::Tensor& recycled_output(ProcessedNode* p_node) {
  auto& out = p_node->Output(0).toTensor();
  fastResizeToZero(out);
  return out;
}

} // namespace

REGISTER_OPERATOR_FUNCTOR(aten::mul, aten_mul, [](Node* n) -> SROperator {
  if (!sr_schema_check(
          n, "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor")) {
    return nullptr;
  }
  return [](ProcessedNode* p_node) {
    const auto& self = p_node->Input(0).toTensor();
    const auto& other = p_node->Input(1).toTensor();
    if (p_node->Output(0).isNone()) {
      // first iteration: let the kernel allocate the result
      p_node->Output(0) = at::cpu::mul(self, other);
      return;
    }
    at::cpu::mul_out(recycled_output(p_node), self, other);
  };
});

REGISTER_OPERATOR_FUNCTOR(aten::add, aten_add, [](Node* n) -> SROperator {
  if (!sr_schema_check(
          n,
          "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")) {
    return nullptr;
  }
  return [](ProcessedNode* p_node) {
    const auto& self = p_node->Input(0).toTensor();
    const auto& other = p_node->Input(1).toTensor();
    const auto alpha = p_node->Input(2).toScalar();
    if (p_node->Output(0).isNone()) {
      p_node->Output(0) = at::cpu::add(self, other, alpha);
      return;
    }
    at::cpu::add_out(recycled_output(p_node), self, other, alpha);
  };
});

REGISTER_OPERATOR_FUNCTOR(aten::sub, aten_sub, [](Node* n) -> SROperator {
  if (!sr_schema_check(
          n,
          "aten::sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")) {
    return nullptr;
  }
  return [](ProcessedNode* p_node) {
    const auto& self = p_node->Input(0).toTensor();
    const auto& other = p_node->Input(1).toTensor();
    const auto alpha = p_node->Input(2).toScalar();
    if (p_node->Output(0).isNone()) {
      p_node->Output(0) = at::cpu::sub(self, other, alpha);
      return;
    }
    at::cpu::sub_out(recycled_output(p_node), self, other, alpha);
  };
});

// Fused a * b + c for graphs where the static runtime has merged the two
// nodes; goes through the same at::cpu:: entry points.
at::Tensor& mul_add_out(
    at::Tensor& out,
    const at::Tensor& a,
    const at::Tensor& b,
    const at::Tensor& c) {
  at::Tensor product = at::cpu::mul(a, b);
  return at::cpu::add_out(out, product, c);
}

} // namespace torch::jit
