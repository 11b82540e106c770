"""Routes a CRD rule takes: every way an ``x-kubernetes-validations`` rule is evaluated, in the
order they are tried, and the one contract they keep.

**A fast route may only answer "surely true".** Anything else it meets — a rule that is false,
a runtime error, a value it is not sure of, a cost budget at stake — it does not answer: the
evaluation goes down the ladder, and the exact path at the bottom writes the errors and
messages as the apiserver does. A route switched off is simply skipped, so every switch
setting answers the same (``tests/cel/test_ladder.py`` replays the recorded cases and the CEL
vectors with each route off in turn).

::

    CelValidator.validate(object, old)                     webhook/schema/celrules.py
     │
     ├─ 1. object batch ── every batchable rule of the object as ONE program over the root
     │       │             (webhook/schema/celbatch.py); true → only the rules it left out are walked;
     │       │             with rules of nested loops, true from its native program (a) only
     │       └─ anything else ─┐
     ▼                         ▼
     2. walk ── node by node as the apiserver walks (celrules), each node's rules one by
     │          one in rule order (webhook/cel/crd.py ``NodeRules``), each charged to the budget
     │
     each program evaluation (webhook/cel/engine/cel_expr.py ``CelExprProgram.evaluate``):
     ├─ a. native ──── generated Python over the plain JSON values (webhook/cel/native.py);
     │                 its value is taken only when the caller accepts it (a rule: true)
     ├─ b. cel-expr ── the C++ program, library calls on selected data computed before it runs
     │                 (hoisted: no Python call inside the engine); a hoisted call that fails →
     ├─ c. cel-expr ── the same program unhoisted, so that CEL reports the error
     └─ d. cel-python  for what cel-cpp words or answers unlike cel-go (and text cel-cpp would
                       cut at a NUL): webhook/cel/engine/cel_python.py, the exact wording
     then, for a rule that runs: its cost, cel-go's count (webhook/cel/cost/count.py), and a
     failing rule's message (messageExpression on the same ladder, b–d). Where an engine stops
     at a bound of its own (``EngineBoundExceeded``: an upper bound of the work, or cel-cpp's
     10,000 iterations), cel-go's count answers instead when it finishes within the limit (with
     an error: d, without the engine's bounds, gives cel-go's words).

``INFERGATE_CEL_ENGINE=cel-python`` (``webhook.cel.engine.interface``) makes cel-python the backend of
the whole process instead: steps b–d are then cel-python alone, with no fast route.

``Routes`` switches routes off: the server and the CLI run ``ALL``; tests pass another to
compare, ``bench/`` to measure what a route is worth. Of the switches, ``hoisted`` is no fast
route but the exact path with library calls computed first, which keeps Python calls out of
cel-expr (each such call leaks in cel-expr-python); switched off, the unhoisted program answers
the same.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True, slots=True)
class Routes:
    """Which of the switchable routes run (every one by default)."""

    object_batch: bool = True   # 1: the whole object's rules in one program (celbatch)
    native: bool = True         # a: generated Python over the JSON values (native)
    hoisted: bool = True        # b: library calls computed before cel-expr runs (else c only)

    def without(self, name: str) -> "Routes":
        """These routes, ``name`` switched off."""
        return replace(self, **{name: False})

    @staticmethod
    def names() -> tuple[str, ...]:
        return tuple(field.name for field in fields(Routes))


ALL = Routes()


@dataclass(frozen=True, slots=True)
class Route:
    """One step of the ladder: where it lives, when it answers, what it may say."""

    name: str
    switch: str | None   # the ``Routes`` field that turns it off (None: part of the exact path)
    module: str
    answers: str
    may_say: str


LADDER: tuple[Route, ...] = (
    Route("object batch", "object_batch", "webhook/schema/celbatch.py",
          "a schema with batchable rules, the object's rules all true, budget not at stake "
          "(rules whose bound measures their values: on the program's native route only)",
          "surely true (the walk then runs only the rules it left out)"),
    Route("walk", None, "webhook/schema/celrules.py, webhook/cel/crd.py",
          "always, when the object batch did not answer; rule by rule at each node",
          "every error, message, warning (ratcheting) and budget exhaustion"),
    Route("native", "native", "webhook/cel/native.py",
          "a program in its subset, on plain JSON values, within the cost limit",
          "surely true (NotNative, or any other value, goes to cel-expr)"),
    Route("cel-expr, hoisted", "hoisted", "webhook/cel/engine/cel_expr.py",
          "a program with library calls on selected data, when those calls succeed",
          "anything: the exact answer, as the unhoisted program would give it"),
    Route("cel-expr", None, "webhook/cel/engine/cel_expr.py",
          "always (the exact path's engine)", "anything, in cel-go's wording"),
    Route("cel-python", None, "webhook/cel/engine/cel_python.py",
          "where cel-cpp words or answers unlike cel-go, or would cut text at a NUL",
          "anything, in cel-go's wording"),
    Route("cost count", None, "webhook/cel/cost/count.py",
          "after each rule the walk runs, when the request's budget could run out",
          "nothing about the rule: what cel-go charges for it (else the estimate)"),
    Route("cel-python backend", None, "webhook/cel/engine/cel_python.py, webhook/cel/engine/interface.py",
          "every evaluation of a process run with INFERGATE_CEL_ENGINE=cel-python (instead of a-d)",
          "anything, in cel-go's wording"),
)
