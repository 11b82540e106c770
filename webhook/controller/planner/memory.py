"""How much accelerator memory a model needs (docs/decisions.md, "Placement planning").

need = parameterCount × bytes_per_parameter × overhead, in GiB, rounded up; exact arithmetic
with ``Fraction`` so a need exactly on a GiB boundary is not pushed over it by float error.
"""

from __future__ import annotations

import math
from fractions import Fraction

GIB = 2**30

# launchStrategy -> runtime overhead (KV cache, activations) over the weights
OVERHEAD = {"Latency": Fraction(12, 10), "Balance": Fraction(135, 100), "Throughput": Fraction(15, 10)}
DEFAULT_STRATEGY = "Latency"

_ONE_BYTE = ("int8", "fp8")
_HALF_BYTE = ("int4", "w4a16", "awq", "gptq", "q4")


def bytes_per_parameter(quantization: str | None) -> Fraction:
    """2 for fp16/bf16 (the default), 1 for int8/fp8, 1/2 for 4-bit quantizations."""
    text = (quantization or "").strip().lower()
    if text.startswith(_HALF_BYTE):
        return Fraction(1, 2)
    if text.startswith(_ONE_BYTE):
        return Fraction(1)
    return Fraction(2)


def memory_need_gib(parameter_count: int | None, quantization: str | None, launch_strategy: str | None) -> int | None:
    """GiB needed by one replica, or None when the parameter count is unknown."""
    if parameter_count is None:
        return None
    overhead = OVERHEAD.get(launch_strategy or DEFAULT_STRATEGY, OVERHEAD[DEFAULT_STRATEGY])
    return math.ceil(Fraction(parameter_count) * bytes_per_parameter(quantization) * overhead / GIB)
