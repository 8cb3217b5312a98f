"""Fused activations: ``dmlops.Activation("leaky_relu", alpha=0.2)``.

DirectML operators such as CONVOLUTION take an optional ``FusedActivation``: an elementwise
function applied to their result. The table of the 18 activations, their parameters (in the
order of the DirectML struct members) and defaults lives in the C++ core
(``dmlops/core/activation.hpp``); this class is its Python face.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Optional

import numpy as np

from . import _core
from ._args import from_json_number, json_number, real, shown

# name -> (DirectML type, ((parameter, DirectML member, default or None), ...))
_TABLE = {name: (dml_type, tuple(params)) for name, dml_type, params in _core.activation_table()}
_BY_DML = {dml_type: name for name, (dml_type, _) in _TABLE.items()}


def _canonical(name: Any, what: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{what} must be an activation name or a dmlops.Activation, not {type(name).__name__}")
    key = name.upper()
    if key in _BY_DML:
        return _BY_DML[key]
    for prefix in ("DML_OPERATOR_ACTIVATION_", "ACTIVATION_", "DML_OPERATOR_ELEMENT_WISE_", "ELEMENT_WISE_"):
        if key.startswith(prefix):
            key = key[len(prefix):]
            break
    if key.lower() in _TABLE:
        return key.lower()
    raise ValueError(f"{what} {shown(name)} is unknown; expected one of {', '.join(_TABLE)}")


class Activation:
    """A fused activation and its parameters (DirectML FLOATs).

    Parameters
    ----------
    name : str
        One of ``elu(alpha=1)``, ``hard_sigmoid(alpha=0.2, beta=0.5)``, ``identity``,
        ``leaky_relu(alpha=0.01)``, ``linear(alpha=1, beta=0)``, ``parametric_softplus(alpha=1,
        beta=1)``, ``relu``, ``scaled_elu(alpha=1.67326, gamma=1.0507)``, ``scaled_tanh(alpha=1,
        beta=1)``, ``sigmoid``, ``softplus(steepness=1)``, ``softsign``, ``tanh``,
        ``thresholded_relu(alpha=1)``, ``shrink(bias=0, threshold=0.5)``, ``celu(alpha=1)``,
        ``gelu``, ``clip(min, max)`` (both required); or the DirectML type name
        (``'DML_OPERATOR_ACTIVATION_RELU'``).
    **parameters : float
        The activation's parameters by name; omitted ones take their defaults. The kernels use
        them rounded to float32, as DirectML's FLOAT members hold them.

    Raises
    ------
    TypeError
        ``name`` is not a string or a parameter is not a number.
    ValueError
        An unknown activation or parameter, a missing required parameter (``clip``'s ``min``
        and ``max``), or a value the activation does not allow (a NaN parameter, ``clip`` with
        ``min > max``, ``celu``'s ``alpha`` or ``softplus``'s ``steepness`` equal to 0).

    Notes
    -----
    The formulas are DirectML's (docs/semantics/convolution.md lists them all): for instance elu
    ``x >= 0 ? x : alpha * (exp(x) - 1)``, hard_sigmoid ``max(0, min(1, alpha * x + beta))``,
    gelu ``0.5 * x * (1 + erf(x / sqrt(2)))``. float16 results are computed in float32 and
    rounded once.

    Examples
    --------
    >>> import dmlops
    >>> dmlops.Activation("leaky_relu", alpha=0.2)
    Activation('leaky_relu', alpha=0.2)
    >>> dmlops.Activation("hard_sigmoid").parameters
    {'alpha': 0.2, 'beta': 0.5}
    >>> dmlops.Activation("clip", min=0, max=6).to_dict()
    {'Type': 'DML_OPERATOR_ELEMENT_WISE_CLIP', 'Desc': {'Min': 0.0, 'Max': 6.0}}
    """

    __slots__ = ("_name", "_values")

    def __init__(self, name: str, **parameters: Any):
        self._name = _canonical(name, "Activation: name")
        _, params = _TABLE[self._name]
        known = [p for p, _, _ in params]
        unknown = set(parameters) - set(known)
        if unknown:
            expected = ", ".join(known) if known else "none"
            raise ValueError(f"Activation: {self._name} has no parameter(s) {sorted(unknown)}; it takes {expected}")
        values = []
        for pname, _, default in params:
            if pname in parameters:
                v = parameters[pname]
                if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
                    raise TypeError(f"Activation: {self._name} parameter {pname} must be a number, not {type(v).__name__}")
                v = real(v, f"Activation: {self._name} parameter {pname}")
                try:  # a FLOAT member: finite values must stay finite in float32
                    struct.pack("<f", v)
                except OverflowError:
                    raise ValueError(f"Activation: {self._name} parameter {pname} {v!r} is too large for a FLOAT") \
                        from None
            elif default is None:
                raise ValueError(f"Activation: {self._name} needs the parameter {pname} (it has no default)")
            else:
                v = float(default)
            values.append(v)
        self._values = tuple(values)
        _core.activation_check(self._name, self._values)

    @classmethod
    def of(cls, value: Any, what: str) -> Optional["Activation"]:
        """None, an Activation, or a name (all parameters at their defaults)."""
        if value is None or isinstance(value, Activation):
            return value
        if isinstance(value, str):
            return cls(_canonical(value, what))
        raise TypeError(f"{what} must be an activation name or a dmlops.Activation, not {type(value).__name__}")

    @property
    def name(self) -> str:
        """The short name (``'leaky_relu'``)."""
        return self._name

    @property
    def dml_type(self) -> str:
        """The DirectML operator type (``'DML_OPERATOR_ACTIVATION_LEAKY_RELU'``)."""
        return _TABLE[self._name][0]

    @property
    def parameters(self) -> dict[str, float]:
        """Every parameter by name, defaults filled in, in the struct's member order."""
        return {p: v for (p, _, _), v in zip(_TABLE[self._name][1], self._values)}

    def _spec(self) -> tuple[str, tuple[float, ...]]:
        return (self._name, self._values)

    def to_dict(self) -> dict[str, Any]:
        """DxDispatch's shape of a nested operator desc: ``{"Type": ..., "Desc": {members}}``."""
        return {"Type": self.dml_type,
                "Desc": {dml: json_number(v) for (_, dml, _), v in zip(_TABLE[self._name][1], self._values)}}

    @classmethod
    def from_dict(cls, d: Any) -> "Activation":
        """From :meth:`to_dict` output; the members may also sit next to ``Type`` (flat)."""
        if not isinstance(d, dict) or "Type" not in d:
            raise ValueError(f"Activation: from_dict needs {{'Type': ..., 'Desc': {{...}}}}, not {shown(d)}")
        name = _canonical(d["Type"], "Activation: Type")
        desc = d.get("Desc") or {}
        if not isinstance(desc, dict):
            raise TypeError(f"Activation: {name} Desc must be a dict of its members, not {shown(desc)}")
        members = dict(desc)
        members.update({k: v for k, v in d.items() if k not in ("Type", "Desc")})
        by_dml = {dml: p for p, dml, _ in _TABLE[name][1]}
        unknown = set(members) - set(by_dml)
        if unknown:
            raise ValueError(f"Activation: {name} has no member(s) {sorted(map(shown, unknown))}")
        return cls(name, **{by_dml[k]: from_json_number(v) for k, v in members.items()})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Activation):
            return NotImplemented
        return self._spec() == other._spec()

    def __hash__(self) -> int:
        return hash(self._spec())

    def __repr__(self) -> str:
        args = "".join(f", {k}={v!r}" for k, v in self.parameters.items())
        return f"Activation({self._name!r}{args})"

    def __reduce__(self) -> tuple[Callable[[Any], "Activation"], tuple[dict[str, Any]]]:
        return (Activation.from_dict, (self.to_dict(),))
