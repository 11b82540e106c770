"""Low-level factory: a cel-expr-python ``Env`` with the Kubernetes 1.36 base environment.

``new_env(variables)`` is what the ``cel-expr`` backend compiles against; ``webhook.cel.crd``
uses it with typed declarations (``cel.Type``) derived from OpenAPI schemas.
"""

from __future__ import annotations

from collections.abc import Mapping

from cel_expr_python import cel

# cel-cpp's own extensions, at the versions the Kubernetes base env enables
# (strings v2: no ``reverse``; lists: cel-go lists v3 functions; sets; optional;
# two-variable comprehensions).
_EXTENSIONS_YAML = """
extensions:
  - name: strings
    version: 2
  - name: lists
  - name: sets
  - name: optional
  - name: two-var-comprehensions
"""


def new_env(variables: Mapping[str, cel.Type]) -> cel.Env:
    """A fresh ``Env`` declaring ``variables`` with the Kubernetes libraries enabled."""
    config = cel.NewEnvConfigFromYaml(_EXTENSIONS_YAML)
    return cel.NewEnv(config=config, variables=dict(variables))
