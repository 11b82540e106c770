"""CEL for infergate: the engine interface and its two backends, the Kubernetes libraries, and
what the apiserver adds for CRD rules.

    from webhook.cel import Evaluator
    evaluator = Evaluator.named("cel-expr")          # built once, at the edge
    program = evaluator.compile("self.replicas <= 10", ["self"])
    program.evaluate({"self": {"replicas": 3}})      # -> True

The package in subpackages by concern (each ``__init__`` says its job and who imports it):
``syntax``, ``checker`` and ``common`` (cel-go's parser, checker and types); ``library`` (the
Kubernetes libraries); ``cost`` (cel-go's estimate and count, the engines' bound);
``environment``, ``optimize`` and ``compiler`` (a program readied for the engines); ``engine``
(the interface and its backends), ``native`` (the native route) and ``celpy`` (cel-python
adapted to cel-go); ``crd`` (CRD rules). ``ladder`` holds the routes an evaluation takes, in
order; ``evaluator`` the engine as a value; ``errors`` and ``limits`` what every part shares.
"""

from webhook.cel.engine.interface import DEFAULT_ENGINE, Engine, Program, engine_names
from webhook.cel.errors import CelCompileError, CelCostExceeded, CelError, CelEvalError, EngineBoundExceeded
from webhook.cel.evaluator import Evaluator

__all__ = [
    "DEFAULT_ENGINE",
    "CelCompileError",
    "CelCostExceeded",
    "EngineBoundExceeded",
    "CelError",
    "CelEvalError",
    "Engine",
    "Evaluator",
    "Program",
    "engine_names",
]
