"""The engine interface and its two backends: compile once, evaluate many times.

- ``interface``: ``Engine`` and ``Program``, what every backend offers, and the backends by
  name;
- ``cel_expr``: the default backend, cel-expr-python (Google's C++ runtime), which evaluates
  down the ladder (``webhook.cel.ladder``): the native route, cel-expr (hoisted, then plain),
  cel-python where cel-cpp words or answers unlike cel-go;
- ``cel_python``: cel-python with cel-go's wording (``webhook.cel.celpy``), the default
  backend's last step and the fallback engine for a whole process.

Imported by what compiles or evaluates CEL (CRD rules, policies, DRA selectors) and by the
command line and the server, which choose a backend; the backends import the compiler, the
optimizing passes, the native route and the engines' bound.
"""
