"""cel-python (``celpy``) adapted to answer as cel-go: the exact path's last step and the fallback
engine (``webhook.cel.engine.cel_python``) build on it.

- ``rewrite``: the optional syntax celpy cannot parse (``x.?f``, ``m[?k]``, ``[?x]``,
  ``{?k: v}``) spelled as function calls, by source span;
- ``evaluator``: celpy's evaluator with cel-go's macros, selection and conditional, under the
  engines' iteration budget;
- ``operators``: cel-go's selection, indexing, equality, arithmetic, logic and messages, and
  the optional-syntax functions;
- ``values``: values between celpy and plain Python.

Imported only by ``webhook.cel.engine.cel_python``; it imports the syntax (for spans), the
libraries and the common values.
"""
