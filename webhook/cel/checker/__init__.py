"""cel-go's type checker, as the apiserver checks a CRD rule against its schema and a policy's
expressions against its kinds.

- ``declarations``: the functions of Kubernetes' 1.36 base environment, with their overloads;
- ``checker``: type checking with cel-go's inference and error messages;
- ``literals``: the validators Kubernetes adds (homogeneous literals, constant arguments).

Imported by what compiles CRD rules (``webhook.cel.crd``), by cost (``webhook.cel.cost``), by the
wording of the engines' errors (``webhook.cel.compiler``) and by ``webhook.policy.typecheck``.
It imports the syntax, the common types and values and the regex library below it. The
engines' own check (cel-cpp's) is ``webhook.cel.compiler``.
"""
