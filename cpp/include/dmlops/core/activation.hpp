// Fused activations: the elementwise functions DirectML lets an operator apply to its result
// (DML_OPERATOR_DESC* FusedActivation), in one table and one row function.
//
// Each activation has up to two FLOAT parameters, listed in the table in the order of its
// DirectML struct's members, with their defaults (clip has none: min and max are required).
// Kernels call apply_activation on a row of results in their accumulation type (float for
// FLOAT16/FLOAT32, double for FLOAT64) before rounding and storing it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dmlops {

enum class ActivationKind : std::uint8_t {
  Elu,
  HardSigmoid,
  Identity,
  LeakyRelu,
  Linear,
  ParametricSoftplus,
  Relu,
  ScaledElu,
  ScaledTanh,
  Sigmoid,
  Softplus,
  Softsign,
  Tanh,
  ThresholdedRelu,
  Shrink,
  Celu,
  Gelu,
  Clip,
};

struct ActivationParameter {
  const char* name;     // "alpha" (the Python keyword)
  const char* dml;      // "Alpha" (the struct member)
  std::optional<double> default_value;  // nullopt: required
};

struct ActivationInfo {
  ActivationKind kind;
  const char* name;      // "leaky_relu"
  const char* dml_type;  // "DML_OPERATOR_ACTIVATION_LEAKY_RELU"
  std::vector<ActivationParameter> parameters;
};

// All 18, in ActivationKind order.
std::span<const ActivationInfo> activation_table();
const ActivationInfo& activation_info(ActivationKind kind);

struct FusedActivation {
  ActivationKind kind = ActivationKind::Identity;
  std::vector<float> parameters;  // one per ActivationInfo::parameters entry, as DirectML FLOATs
};

// The activation called `name` (the short name, or the DirectML type name with or without its
// DML_OPERATOR_ prefix, any case) with these parameter values in table order; InvalidArgument
// naming `op` for an unknown name, a wrong count or a value the formula cannot take (NaN,
// celu alpha 0, softplus steepness 0, clip min > max).
FusedActivation make_activation(const std::string& op, std::string_view name, const std::vector<float>& parameters);
// Checks an activation built by hand against the same rules.
void validate_activation(const std::string& op, const FusedActivation& activation);

// row[i] = activation(row[i]) for i < n.
void apply_activation(const FusedActivation& activation, float* row, std::int64_t n);
void apply_activation(const FusedActivation& activation, double* row, std::int64_t n);

}  // namespace dmlops
