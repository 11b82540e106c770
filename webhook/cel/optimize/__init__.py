"""Checked-AST passes for the engines: Kubernetes' extra compile-time checks and
the rewrite of Kubernetes library calls into what the C++ runtime evaluates.

* **validate**: homogeneous aggregate literals, constant regexes (``matches``, ``find``,
  ``findAll``), constant ``duration``/``timestamp`` literals (Go's parsers) and literal
  ``format`` calls, as the apiserver rejects them, and the conversions cel-cpp declares and
  cel-go does not (``duration(int)``, ``int(duration)``);
* **fold**: a library call whose arguments are all constants is evaluated once, here
  (Kubernetes' ``OptOptimize`` does the same), so it costs no Python call per evaluation;
* **native**: ``isSorted``/``sum``/``min``/``max``/``indexOf``/``lastIndexOf``,
  ``optional.unwrap``/``unwrapOpt`` and ``find``/``findAll`` with a constant pattern become
  plain CEL (comprehensions, cel-cpp's ``regex`` extension): no Python call at all;
* **guard**: cel-go's range checks and messages around cel-cpp's ``charAt``/``substring``/
  ``indexOf``/``lastIndexOf``, and a cap on a computed ``lists.range(n)``; where cel-cpp and
  cel-go part ways on dyn values: the list functions and string functions on a value of
  another type (cel-go's ``no such overload: f(types)``), a ``flatten`` depth that is no int,
  ``optional.ofNonZeroValue`` of Go's zero time, strings parsed as Go's strconv,
  ``time.ParseDuration`` and ``time.Parse(time.RFC3339)`` read them (``uint``, ``double``,
  ``duration``, ``timestamp``; ``int`` and ``sum``
  only where it keeps a program on the native fast path, see ``go_number_syntax``);
* **hoist** (``hoist=True``): a library call on data selected from a variable
  (``quantity(self.memory)``) becomes a hidden variable the backend computes in Python
  before the evaluation, and so is ``string(dyn(self.ts))``, a CRD rule's ``string()`` of a
  date-time field (its offset, which cel-go prints, is in the Python value only);
* **private**: any other library call becomes a call of the runtime env's ``@k8s.<name>``.

Calling Python from cel-expr-python 0.1.3 leaks memory on every call, so all but the last
keep steady-state evaluation in C++.

One module per job: ``optimizer`` (the pass: ``optimize(checked)``), ``checks``, ``plain_cel``,
``guards``, ``library_calls`` (fold, hoist, private), over ``nodes`` (building AST nodes).
Imported by the shared check step (``webhook.cel.compiler``) and the default backend (its
hoists); it imports the runtime environment's names, the libraries and Go's parsers.
"""
