"""The ladder's ``native`` route (``webhook.cel.ladder``: its contract): checked CEL programs
run as generated Python, for the common subset.

cel-expr converts every value an evaluation reads into C++ values (node by node, on every
call: a review's object and request again each time) before its C++ interpreter runs; for
the rules a review meets most — field selection, ``has``, comparisons, string tests, the
list macros — that conversion costs more than the rules. This package compiles the checked
AST (after ``optimize``, the same one cel-expr plans) into one Python function that reads
the plain JSON values in place.

Its callers take a value only when they can use it as it is — every rule ``true``, a
matchCondition decided, a mutation's patch. Where this evaluator is not certain of cel-go's
answer it raises :class:`NotNative` instead of guessing, and the route declines:

* at compile time, for any function, overload or literal outside the subset below
  (``compile_native`` returns None: the program always runs on cel-expr);
* at evaluation, for any CEL error (a missing key, an overflow, an index out of range,
  no matching overload), for any value that is not plain JSON (timestamps, durations,
  quantities, uint, bytes), and past cel-cpp's 10,000 comprehension iterations.

So ``NotNative`` means "ask cel-expr", never "false".

It bounds its own work, so a caller need not measure the activation before it runs
(``cost.bound``): each comprehension counts its iterations times the nodes its condition
and step hold (a comprehension inside counting itself), and past the cost limit the program
stops with :class:`EngineBoundExceeded` (its own count, not cel-go's). That count never exceeds the bound ``cost.bound``
computes from the activation's sizes for the same program, so whatever it refuses, the
bound would have refused too. The logical operators short-circuit
as CEL's do (``true || x`` is true whatever ``x`` is); an error on their left gives up rather
than trying the right side (cel-go's ``error || true`` is true: cel-expr says so).

The subset: constants (not uint/bytes), variables, field selection and ``has``, list and map
literals (optional entries too), comprehensions (every macro, two-variable ones included),
``! && || ?:``, ``== != < <= > >= in``, ``+ - * / %`` and unary ``-`` on int/double (and
``+`` on strings and lists), indexing, ``size``, ``dyn``, ``string``/``int`` conversions of
strings and ints, ``startsWith``/``endsWith``/``contains``, ``matches`` (RE2, as cel-cpp),
``join``/``split``/``lowerAscii``/``upperAscii`` (strings extension), ``sort`` (lists
extension), and the optional library's ``.?``, ``[?]``, ``optional.of/none``, ``orValue``,
``hasValue``, ``value``, ``or``.

One module per job: ``program`` (``compile_native``, ``NativeProgram``), ``codegen`` (the
translation), ``runtime`` (what the generated function calls). Imported by the default engine
(``webhook.cel.engine.cel_expr``), which takes a native answer only where its caller accepts
it; it imports the runtime environment's names and the libraries it calls.
"""
