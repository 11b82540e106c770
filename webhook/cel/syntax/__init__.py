"""cel-go's parser: what the apiserver derives from a rule before running it.

- ``ast``: the AST in cel-go's shape (node ids, macros expanded) and its walk;
- ``parser``: source to AST with each node's offsets and spans, and syntax errors as cel-go
  displays them.

The parse behind CRD rules' type checking (``webhook.cel.checker``), their estimated cost
(``webhook.cel.cost``), which variables and fields a rule reads (``webhook.cel.crd``), and
source rewrites (``webhook.cel.crd.rewrite``, ``webhook.cel.celpy.rewrite``); policies' lookups
(``webhook.policy.arguments``) read it too. It imports nothing of infergate.
"""
