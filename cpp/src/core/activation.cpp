#include "dmlops/core/activation.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/platform.hpp"

namespace dmlops {
namespace {

using K = ActivationKind;

const std::vector<ActivationInfo>& table() {
  static const std::vector<ActivationInfo> entries = {
      {K::Elu, "elu", "DML_OPERATOR_ACTIVATION_ELU", {{"alpha", "Alpha", 1.0}}},
      {K::HardSigmoid, "hard_sigmoid", "DML_OPERATOR_ACTIVATION_HARD_SIGMOID", {{"alpha", "Alpha", 0.2}, {"beta", "Beta", 0.5}}},
      {K::Identity, "identity", "DML_OPERATOR_ACTIVATION_IDENTITY", {}},
      {K::LeakyRelu, "leaky_relu", "DML_OPERATOR_ACTIVATION_LEAKY_RELU", {{"alpha", "Alpha", 0.01}}},
      {K::Linear, "linear", "DML_OPERATOR_ACTIVATION_LINEAR", {{"alpha", "Alpha", 1.0}, {"beta", "Beta", 0.0}}},
      {K::ParametricSoftplus, "parametric_softplus", "DML_OPERATOR_ACTIVATION_PARAMETRIC_SOFTPLUS",
       {{"alpha", "Alpha", 1.0}, {"beta", "Beta", 1.0}}},
      {K::Relu, "relu", "DML_OPERATOR_ACTIVATION_RELU", {}},
      {K::ScaledElu, "scaled_elu", "DML_OPERATOR_ACTIVATION_SCALED_ELU", {{"alpha", "Alpha", 1.67326}, {"gamma", "Gamma", 1.0507}}},
      {K::ScaledTanh, "scaled_tanh", "DML_OPERATOR_ACTIVATION_SCALED_TANH", {{"alpha", "Alpha", 1.0}, {"beta", "Beta", 1.0}}},
      {K::Sigmoid, "sigmoid", "DML_OPERATOR_ACTIVATION_SIGMOID", {}},
      {K::Softplus, "softplus", "DML_OPERATOR_ACTIVATION_SOFTPLUS", {{"steepness", "Steepness", 1.0}}},
      {K::Softsign, "softsign", "DML_OPERATOR_ACTIVATION_SOFTSIGN", {}},
      {K::Tanh, "tanh", "DML_OPERATOR_ACTIVATION_TANH", {}},
      {K::ThresholdedRelu, "thresholded_relu", "DML_OPERATOR_ACTIVATION_THRESHOLDED_RELU", {{"alpha", "Alpha", 1.0}}},
      {K::Shrink, "shrink", "DML_OPERATOR_ACTIVATION_SHRINK", {{"bias", "Bias", 0.0}, {"threshold", "Threshold", 0.5}}},
      {K::Celu, "celu", "DML_OPERATOR_ACTIVATION_CELU", {{"alpha", "Alpha", 1.0}}},
      {K::Gelu, "gelu", "DML_OPERATOR_ACTIVATION_GELU", {}},
      {K::Clip, "clip", "DML_OPERATOR_ELEMENT_WISE_CLIP", {{"min", "Min", std::nullopt}, {"max", "Max", std::nullopt}}},
  };
  return entries;
}

std::string lower(std::string_view text) {
  std::string s(text);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// ln(1 + e^z) without overflow for large z.
template <class A>
A log1p_exp(A z) {
  return z > A(0) ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z));
}

// The one switch over the kinds: the row loop sits inside each case so that the compiler
// sees a simple elementwise loop. Run through IsaKernel, so the piecewise-linear ones (relu,
// leaky relu, clip...) move AVX2 vectors where the CPU has them: with SSE2's, relu after a 1x1
// 64>256@56 layer was 14% of its time on a Zen 5. No FMA in either variant, so the same bits.
template <class A>
DMLOPS_ALWAYS_INLINE inline void apply(const FusedActivation& act, A* row, std::int64_t n) {
  const A p = act.parameters.size() > 0 ? A(act.parameters[0]) : A(0);
  const A q = act.parameters.size() > 1 ? A(act.parameters[1]) : A(0);
  const auto each = [&](auto f) {
    for (std::int64_t i = 0; i < n; ++i) row[i] = f(row[i]);
  };
  switch (act.kind) {
    case K::Elu: return each([&](A x) { return x >= A(0) ? x : p * std::expm1(x); });
    case K::HardSigmoid: return each([&](A x) { return std::max(A(0), std::min(A(1), p * x + q)); });
    case K::Identity: return;
    case K::LeakyRelu: return each([&](A x) { return x >= A(0) ? x : p * x; });
    case K::Linear: return each([&](A x) { return p * x + q; });
    case K::ParametricSoftplus: return each([&](A x) { return p * log1p_exp(q * x); });
    case K::Relu: return each([](A x) { return x > A(0) ? x : A(0); });
    case K::ScaledElu: return each([&](A x) { return x > A(0) ? q * x : q * p * std::expm1(x); });
    case K::ScaledTanh: return each([&](A x) { return p * std::tanh(q * x); });
    case K::Sigmoid: return each([](A x) { return A(1) / (A(1) + std::exp(-x)); });
    case K::Softplus: return each([&](A x) { return log1p_exp(p * x) / p; });
    case K::Softsign: return each([](A x) { return x / (A(1) + std::abs(x)); });
    case K::Tanh: return each([](A x) { return std::tanh(x); });
    case K::ThresholdedRelu: return each([&](A x) { return x > p ? x : A(0); });
    case K::Shrink: return each([&](A x) { return x < -q ? x + p : (x > q ? x - p : A(0)); });
    case K::Celu: return each([&](A x) { return std::max(A(0), x) + std::min(A(0), p * std::expm1(x / p)); });
    case K::Gelu: return each([](A x) { return A(0.5) * x * (A(1) + std::erf(x / std::sqrt(A(2)))); });
    case K::Clip: return each([&](A x) { return std::min(std::max(x, p), q); });
  }
}

}  // namespace

std::span<const ActivationInfo> activation_table() { return table(); }

const ActivationInfo& activation_info(ActivationKind kind) {
  const auto index = static_cast<std::size_t>(kind);
  if (index >= table().size()) fail("unknown activation kind ", static_cast<int>(kind));
  return table()[index];
}

void validate_activation(const std::string& op, const FusedActivation& act) {
  const ActivationInfo& info = activation_info(act.kind);
  if (act.parameters.size() != info.parameters.size())
    fail(op, ": fused_activation ", info.name, " takes ", info.parameters.size(), " parameters, got ",
         act.parameters.size());
  for (std::size_t i = 0; i < act.parameters.size(); ++i) {
    if (std::isnan(act.parameters[i]))
      fail(op, ": fused_activation ", info.name, " parameter ", info.parameters[i].name, " is NaN");
  }
  if (act.kind == K::Celu && act.parameters[0] == 0.0f)
    fail(op, ": fused_activation celu needs alpha != 0 (it divides by alpha)");
  if (act.kind == K::Softplus && act.parameters[0] == 0.0f)
    fail(op, ": fused_activation softplus needs steepness != 0 (it divides by the steepness)");
  if (act.kind == K::Clip && act.parameters[0] > act.parameters[1])
    fail(op, ": fused_activation clip has min ", act.parameters[0], " > max ", act.parameters[1]);
}

FusedActivation make_activation(const std::string& op, std::string_view name, const std::vector<float>& parameters) {
  std::string key = lower(name);
  for (const char* prefix : {"dml_operator_activation_", "activation_", "dml_operator_element_wise_", "element_wise_"}) {
    if (key.rfind(prefix, 0) == 0) {
      key = key.substr(std::string_view(prefix).size());
      break;
    }
  }
  for (const ActivationInfo& info : table()) {
    if (key == info.name) {
      FusedActivation act{info.kind, parameters};
      validate_activation(op, act);
      return act;
    }
  }
  std::string names;
  for (const ActivationInfo& info : table()) names += (names.empty() ? "" : ", ") + std::string(info.name);
  fail(op, ": fused_activation '", name, "' is unknown; expected one of ", names);
}

void apply_activation(const FusedActivation& activation, float* row, std::int64_t n) {
  IsaKernel<&apply<float>>::run(activation, row, n);
}
void apply_activation(const FusedActivation& activation, double* row, std::int64_t n) {
  IsaKernel<&apply<double>>::run(activation, row, n);
}

}  // namespace dmlops
