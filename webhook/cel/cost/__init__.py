"""What an evaluation costs.

- ``estimate``: cel-go's static estimate with Kubernetes' and the extensions' estimators
  (what a CRD's rules may cost when the CRD is created; a rule's charge by the sizes seen);
- ``count``: cel-go's actual cost of one evaluation, counted as its cost tracker counts (what
  the apiserver charges a CRD rule against the per-call limit and the request's budget);
- ``bound``: the engines' own bound, a polynomial in the activation's sizes measured before
  an evaluation starts (``EngineBoundExceeded``): never cel-go's count, only its upper bound.

The numbers themselves (Kubernetes' limits, the engines' budgets) are ``webhook.cel.limits``.
Imported by the engines (``bound``) and by what runs CRD rules and checks CRDs (``estimate``,
``count``); it imports the checker, the syntax, the types and the libraries below it.
"""
