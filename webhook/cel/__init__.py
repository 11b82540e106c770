"""CEL for infergate: one small engine interface, two backends, the Kubernetes libraries.

    from webhook.cel import get_engine
    program = get_engine().compile("self.replicas <= 10", ["self"])
    program.evaluate({"self": {"replicas": 3}})   # -> True
"""

from webhook.cel.engine.interface import DEFAULT_ENGINE, Engine, Program, engine_names, get_engine
from webhook.cel.errors import CelCompileError, CelCostExceeded, CelError, CelEvalError, EngineBoundExceeded

__all__ = [
    "DEFAULT_ENGINE",
    "CelCompileError",
    "CelCostExceeded",
    "EngineBoundExceeded",
    "CelError",
    "CelEvalError",
    "Engine",
    "Program",
    "engine_names",
    "get_engine",
]
