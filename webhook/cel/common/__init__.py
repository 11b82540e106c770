"""CEL types and values as cel-go and Kubernetes share them (cel-go's ``common/types``,
Kubernetes' ``apiserver/pkg/cel/common``).

- ``types``: a CEL type as the checker sees it (``CelType``);
- ``typenames``: CEL type names, parsed from cel-go's spelling and printed from checked types;
- ``decl``: the CEL type of a CRD schema node (``DeclType``);
- ``escaping``: schema property names as CEL field names;
- ``values``: a custom resource's JSON values as CEL sees them (timestamps, durations, bytes).

The floor of ``webhook.cel``: it imports only ``webhook.cel.limits`` and Go's behaviour
(``webhook.gocompat``, ``webhook.validation``), and anything in ``webhook.cel`` may import it.
"""
