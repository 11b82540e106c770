"""cel-expr-python's side of the house: its environments with the Kubernetes 1.36 base
libraries, and the AST it plans.

- ``env``: the *checking* env (Kubernetes' declarations, optional types, cross-type
  comparisons), the *runtime* env (each library function as a private ``@k8s.<name>``
  implemented in Python), values across the boundary and text the C++ runtime would cut;
- ``protos``: CEL's AST protos (``cel.expr.CheckedExpr``), the bridge to cel-expr-python's
  AST, and the walk over them.

Kubernetes' ``apiserver/pkg/cel/environment`` for the C++ runtime. Imported by whatever reads,
rewrites or plans a checked AST (``optimize``, ``compiler``, ``cost.bound``, ``native``, the
engines) and by the planner's DRA selectors; it imports the libraries and the type names.
"""
