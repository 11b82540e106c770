"""The ladder: every route a CRD rule can take, in the order tried, and the one contract they keep.

**A fast route may only answer "surely true".** Anything else it meets — a rule that is false,
a runtime error, a value it is not sure of, a cost budget at stake — it does not answer: it
declines (``DECLINED``), and the next route on the ladder is tried, down to the exact path,
which writes the errors and messages as the apiserver does. A fast route switched off is simply
skipped (``Routes``), so every setting of the switches answers the same; the replay of every
recorded case and CEL vector with each fast route off in turn (``tests/cel/test_ladder.py``)
reads ``LADDER`` for the routes to switch.

``LADDER`` is the order, and the code runs it: each stage's owner asks its routes in this order
(``Routes.steps``), through a method named ``<route>_route``, until one answers::

    object   CelValidator.validate (webhook.schema.celrules): an object's rules
               object_batch → walk (each rule, node by node, down the rule stage)
    rule     NodeRules (webhook.cel.crd.rules): one rule, or its messageExpression
               program (down the program stage) → cost_count
    program  CelExprProgram.evaluate (webhook.cel.engine.cel_expr): one evaluation
               native → bound → hoisted → cel_expr → cel_python

A policy's expressions take the program stage too. On the cel-python engine (``--cel-engine
cel-python``) a program is celpy alone: no fast route and no program stage.
"""

from __future__ import annotations

from dataclasses import dataclass

OBJECT, RULE, PROGRAM = "object", "rule", "program"


class _Declined:
    __slots__ = ()

    def __repr__(self) -> str:
        return "DECLINED"


DECLINED = _Declined()  # a route's "not mine": the next route is asked


@dataclass(frozen=True, slots=True)
class Route:
    """One step of the ladder: its stage, whether it is a fast route (``Routes`` can switch it
    off), when it answers and what it may say, and where it is implemented."""

    name: str
    stage: str
    fast: bool
    answers: str
    may_say: str
    where: str


LADDER: tuple[Route, ...] = (
    Route("object_batch", OBJECT, True,
          "the schema's rules batch into one program over the root and it is true, the budget not at stake "
          "(a program of rules whose bound measures their values: on its native route only)",
          "surely true; the walk then runs only the rules it left out", "webhook/schema/celbatch.py"),
    Route("walk", OBJECT, False, "always: node by node as the apiserver walks, each node's rules in order",
          "every error, message, warning (ratcheting) and budget exhaustion", "webhook/schema/celrules.py"),
    Route("program", RULE, False, "always, unless an engine stops the evaluation at a bound of its own",
          "the rule's value or its error", "webhook/cel/crd/rules.py"),
    Route("native", PROGRAM, True,
          "the program is in the native subset, on plain JSON values, within the cost limit, and the caller "
          "accepts the value as it is (a rule: true)", "surely true (for a policy: a value its caller uses as it is)",
          "webhook/cel/native/"),
    Route("bound", PROGRAM, False, "the program's bound over the activation's sizes is past the cost limit",
          "EngineBoundExceeded (for a rule, cost_count then answers)", "webhook/cel/cost/bound.py"),
    Route("hoisted", PROGRAM, True,
          "the program hoists library calls on selected data and they succeed (cel-expr-python leaks per "
          "Python call: hoisted, none is left in the evaluation)", "anything: what the plain program says",
          "webhook/cel/engine/cel_expr.py"),
    Route("cel_expr", PROGRAM, False,
          "always, but where cel-cpp words an error unlike cel-go or would cut text at a NUL",
          "anything, in cel-go's words (webhook/cel/compiler/wording.py)", "webhook/cel/engine/cel_expr.py"),
    Route("cel_python", PROGRAM, False, "where cel_expr declines", "anything, in cel-go's words",
          "webhook/cel/engine/cel_python.py"),
    Route("cost_count", RULE, False,
          "where an engine stopped the evaluation at a bound of its own and cel-go's count finishes",
          "cel-go's value and what it charges (an error in cel-go's words), else the stop",
          "webhook/cel/cost/count.py"),
)

FAST_ROUTES = tuple(route.name for route in LADDER if route.fast)


class Routes:
    """Which fast routes run (every one by default): the switches of ``LADDER``. ``steps`` holds,
    per stage, the methods of the routes that run, in the ladder's order."""

    __slots__ = ("off", "object_steps", "rule_steps", "program_steps")

    def __init__(self, off: frozenset[str] = frozenset()) -> None:
        unknown = set(off) - set(FAST_ROUTES)
        if unknown:
            raise ValueError(f"no fast route {', '.join(sorted(unknown))}; fast routes: {', '.join(FAST_ROUTES)}")
        self.off = frozenset(off)
        self.object_steps = self.steps(OBJECT)
        self.rule_steps = self.steps(RULE)
        self.program_steps = self.steps(PROGRAM)

    def runs(self, name: str) -> bool:
        return name not in self.off

    def steps(self, stage: str) -> tuple[str, ...]:
        """The methods (``<route>_route``) of ``stage``'s routes that run, in order."""
        return tuple(f"{route.name}_route" for route in LADDER if route.stage == stage and route.name not in self.off)

    def without(self, name: str) -> "Routes":
        """These routes, the fast route ``name`` switched off."""
        return Routes(self.off | {name})

    @staticmethod
    def names() -> tuple[str, ...]:
        """The fast routes, which can be switched off."""
        return FAST_ROUTES

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Routes) and other.off == self.off

    def __hash__(self) -> int:
        return hash(self.off)

    def __repr__(self) -> str:
        return f"Routes(off={sorted(self.off)})" if self.off else "ALL"


ALL = Routes()
