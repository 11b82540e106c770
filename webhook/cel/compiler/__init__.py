"""From source to a program both engines run.

``check``: an expression parsed and type-checked by cel-cpp against Kubernetes' declarations,
then the optimizing passes' checks (Kubernetes' literal checks, cel-go's range checks); its
compile errors in cel-go's words; the runtime bound's shape. Both backends (``cel_expr``,
``cel_python``) compile through it. cel-go's own checker, which types CRD rules by their
schema and policies by their kinds, is ``webhook.cel.checker``.
"""
