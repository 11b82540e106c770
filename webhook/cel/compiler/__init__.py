"""From source to a program both engines run.

- ``check``: an expression parsed and type-checked by cel-cpp against Kubernetes'
  declarations, then the optimizing passes' checks (Kubernetes' literal checks, cel-go's range
  checks); the runtime bound's shape of the result;
- ``wording``: cel-cpp's compile reports and runtime messages in cel-go's words.

Both backends (``webhook.cel.engine``) compile through it and word their errors with it. It
imports the environment, the optimizing passes, the engines' bound (``cost.bound``) and
cel-go's checker (to reword a call no overload's arity fits). cel-go's checker itself, which
types CRD rules by their schema and policies by their kinds, is ``webhook.cel.checker``.
"""
