"""The default backend: cel-expr-python (Google's C++ CEL runtime).

``compile`` takes the checking step both backends share (``compiler.check``: Kubernetes'
declarations, ``optimize``'s checks) and plans the result in the runtime env; ``evaluate`` runs
the ladder's program stage (``webhook.cel.ladder``), whose routes are this program's
``<route>_route`` methods: the native program, the bound, cel-expr with library calls hoisted,
then plain (one C++ call plus the conversion of the result, cel-cpp's messages in cel-go's words
by ``compiler.wording``), and cel-python (``cel_python``) where cel-cpp words or answers unlike
cel-go.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from cel_expr_python import cel
from google.protobuf import duration_pb2, timestamp_pb2

from webhook.cel.environment import protos
from webhook.cel.engine.kept import Kept
from webhook.cel.compiler.check import Checked, Checker, free_variables
from webhook.cel.environment.env import cut_by_runtime, from_runtime, runtime_env, to_runtime
from webhook.cel.errors import CelCompileError, CelCostExceeded, CelEvalError, EngineBoundExceeded
from webhook.cel.ladder import ALL, DECLINED, Routes
from webhook.cel.library import LibraryError
from webhook.cel.library.base import NONE, OptionalValue
from webhook.cel.limits import PER_CALL_LIMIT
from webhook.cel.native.program import NativeProgram, compile_native
from webhook.cel.native.runtime import NotNative
from webhook.cel.library.dispatch import select_overload
from webhook.cel.errors import COST_EXCEEDED
from webhook.cel.optimize.library_calls import Hoist, HOIST_VARIABLES
from webhook.cel.optimize.optimizer import optimize
from webhook.cel.cost.bound import CostShape, KnownSizes, measure
from webhook.cel.compiler.wording import clean_message

if TYPE_CHECKING:
    from webhook.cel.engine.cel_python import CelPythonEngine


class Bindings(dict):
    """Variables that several evaluations share (one review's policies): each is converted
    into a CEL value once, when an evaluation first reads it, instead of on every evaluation.

    A cel-expr ``Activation`` converts a variable on first read and keeps the result; one is
    built for these values on the first evaluation. The values must not change once bound:
    new values make new ``Bindings``."""

    __slots__ = ("_activation", "_sizes", "_cut")

    def __init__(self, values: Mapping[str, Any] = ()) -> None:
        super().__init__(values)
        self._activation: cel.Activation | None = None
        self._sizes: dict[str, tuple[int, int]] = {}
        self._cut: dict[str, bool] = {}

    def activation(self, env: cel.Env) -> cel.Activation:
        if self._activation is None:
            self._activation = env.Activation(self)
        return self._activation

    def sizes(self, names: Iterable[str], known: KnownSizes | None = None) -> tuple[int, int]:
        """(longest list or map, longest string) over the named values, each measured once
        (the objects ``known`` holds not walked)."""
        longest_list = longest_string = 0
        for name in names:
            size = self._sizes.get(name)
            if size is None:
                size = self._sizes[name] = measure((self.get(name),), known)
            longest_list, longest_string = max(longest_list, size[0]), max(longest_string, size[1])
        return longest_list, longest_string

    def cut_by_runtime(self, names: Iterable[str]) -> bool:
        """Whether a named value holds text the C++ runtime would cut (``env.cut_by_runtime``),
        each value looked at once."""
        for name in names:
            cut = self._cut.get(name)
            if cut is None:
                cut = self._cut[name] = name in self and cut_by_runtime((self[name],))
            if cut:
                return True
        return False


class CelExprProgram:
    """A compiled expression: one C++ program, plus, when library calls read selected data,
    the values those calls need (``hoists``) and the plain program to fall back on."""

    __slots__ = ("expression", "_program", "_fallback", "_hoists", "_optional_root", "python_calls", "cost", "_measure",
                 "_env", "reads", "_native", "_native_expr", "_declared", "_rename", "_mixed_literals", "_exact", "_engine", "_known")

    def __init__(
        self,
        expression: str,
        program: cel.Expression,
        *,
        optional_root: bool,
        python_calls: int,
        cost: CostShape,
        hoists: tuple[Hoist, ...] = (),
        fallback: cel.Expression | None = None,
        env: cel.Env | None = None,
        reads: frozenset[str] = frozenset(),
        native_expr: Any = None,
        declared: frozenset[str] = frozenset(),
        rename: Mapping[str, str] | None = None,
        mixed_literals: bool = False,
        engine: CelExprEngine,
        known: KnownSizes | None = None,
    ) -> None:
        self.expression = expression
        self._program = program
        self._fallback = fallback
        self._hoists = hoists
        self._optional_root = optional_root
        self.python_calls = python_calls  # library calls left to Python, per evaluation (static count)
        self.cost = cost
        self._measure = cost.needs_measure
        self._env = env  # the runtime env, for the Activation of shared ``Bindings``
        self.reads = reads  # the variables the program reads
        # the checked AST the native program is generated from when first needed (``native``)
        self._native_expr, self._native = native_expr, _UNBUILT
        self._declared, self._rename, self._mixed_literals = declared, dict(rename or {}), mixed_literals  # for ``cel_python_route``
        self._exact: Any = None  # ``_python_program``
        self._engine = engine  # its fallback backend, for ``_python_program``
        self._known = known  # the engine's sizes of stored objects, for ``bound_route``

    @property
    def native(self) -> NativeProgram | None:
        """The same program as generated Python, when it fits (``webhook.cel.native``): generated
        and compiled on first use, so that loading many programs compiles none that no request
        runs (a start-up cost)."""
        native = self._native
        if native is _UNBUILT:  # two threads may both build it: the same program, one kept
            native = self._native = compile_native(self._native_expr) if self._native_expr is not None else None
        return native

    @property
    def hoisted_calls(self) -> int:
        """Library calls on selected data computed in Python before each evaluation (``Hoist``)."""
        return len(self._hoists)

    def evaluate(self, activation: Mapping[str, Any], *, cost_limit: int | None = None,
                 accept: Callable[[Any], bool] | None = None, routes: Routes = ALL) -> Any:
        """The program's value on ``activation``, down the ladder's program stage
        (``webhook.cel.ladder``): each route that runs (``routes``) in order, until one answers.
        ``accept``: the answers the caller can use without cel-expr's exact errors and messages
        (all rules true, a patch), which the native route may give."""
        limit = cost_limit or PER_CALL_LIMIT
        for step in routes.program_steps:
            answer = getattr(self, step)(activation, limit, accept)
            if answer is not DECLINED:
                return answer
        raise AssertionError("cel_python_route always answers")

    # -- the program stage's routes, in the ladder's order --------------------------------------

    def native_route(self, activation: Mapping[str, Any], limit: int, accept: Callable[[Any], bool] | None) -> Any:
        """The generated Python (``webhook.cel.native``), where the caller accepts its value as
        it is. It bounds its own work (CelCostExceeded past the limit): no measure first."""
        if accept is None:
            return DECLINED
        native = self._native
        if native is _UNBUILT:
            native = self.native
        if native is None:
            return DECLINED
        try:
            value = native(activation, limit)
        except NotNative:
            return DECLINED
        return value if accept(value) else DECLINED

    def bound_route(self, activation: Mapping[str, Any], limit: int, accept: Any) -> Any:
        """``EngineBoundExceeded`` when the program's bound over the activation's sizes is past
        ``limit`` (cel-cpp's exact path would never stop otherwise); else the next route."""
        if self._measure:
            sizes = activation.sizes(self.reads, self._known) if self._shares(activation) \
                else measure(activation.values(), self._known)
            if self.cost.at(*sizes) > limit:
                raise EngineBoundExceeded()
        return DECLINED

    def hoisted_route(self, activation: Mapping[str, Any], limit: int, accept: Any) -> Any:
        """The program with its library calls on selected data computed in Python first
        (``Hoist``); the plain program answers where there are none or one fails."""
        if not self._hoists or self._cut(activation):
            return DECLINED
        data = {name: activation[name] for name in self.reads if name in activation} \
            if self._shares(activation) else activation  # the hidden variables differ per program
        values = hoisted_values(self._hoists, data)
        if values is None:  # a selection or a library call fails: let the plain program report it
            return DECLINED
        data = {**data, **values}
        return self._answer(self._program, self._eval(self._program, data), data, False)

    def cel_expr_route(self, activation: Mapping[str, Any], limit: int, accept: Any) -> Any:
        """The plain program on cel-expr: its value, or its error in cel-go's words."""
        if self._cut(activation):
            return DECLINED
        program = self._fallback if self._hoists else self._program
        if self._shares(activation):
            return self._answer(program, self._eval_on(program, activation.activation(self._env)), activation, True)
        return self._answer(program, self._eval(program, activation), activation, False)

    def cel_python_route(self, activation: Mapping[str, Any], limit: int, accept: Any) -> Any:
        """cel-python (``webhook.cel.engine.cel_python``), where cel-expr declined: cel-cpp
        fails a selection or an index on a value of another kind (a field of a string, ``has()``
        on a number, ``null.?f``) and some dispatches (``-d`` of a duration, ``join()`` of
        numbers, a Quantity method given a Semver) with words of its own, where cel-go names the
        field, key or runtime types, or answers (``has()`` of a scalar's field is false,
        ``null.?f`` is optional.none()); and it would cut text at a NUL. Under the same limit."""
        return self._on_python(activation, limit)

    def _shares(self, activation: Mapping[str, Any]) -> bool:
        """Whether ``activation`` is values bound for many programs (``Bindings``)."""
        return type(activation) is Bindings and self._env is not None

    def _cut(self, activation: Mapping[str, Any]) -> bool:
        """Whether the activation holds text the C++ runtime would cut at a NUL
        (``env.cut_by_runtime``), when cel-python can answer instead."""
        cut = activation.cut_by_runtime(self.reads) if self._shares(activation) else cut_by_runtime(activation.values())
        return cut and self._python_program() is not None

    def _answer(self, program: cel.Expression, result: cel.Value, activation: Mapping[str, Any], shared: bool) -> Any:
        """cel-expr's result as a plain value, its error raised in cel-go's words, or DECLINED
        where cel-cpp's own words have no cel-go equivalent (cel-python answers)."""
        value = result.value()
        if value is True or value is False:  # most rules: no type check, no conversion
            return value
        if result.type() == _ERROR and _NON_CEL_VALUE in value:
            # dynamically typed values take timestamps/durations only as protobuf well-known types
            names = self.reads if shared else activation
            result = self._eval(program, {name: well_known(activation[name]) for name in names if name in activation})
        if result.type() == _ERROR:
            message = clean_message(result.value())
            if message.startswith(_CEL_CPP_ONLY) and self._python_program() is not None:
                return DECLINED
            raise _eval_error(message)
        value = from_runtime(result.plain_value())
        if self._optional_root:
            return OptionalValue.of(value[0]) if value else NONE
        return value

    def evaluate_unbounded(self, activation: Mapping[str, Any]) -> Any:
        """The value on ``activation`` on the exact path without this engine's own bounds (its
        bound of the work, cel-cpp's 10,000 iterations): cel-python, for an evaluation cel-go's
        count has shown to finish within the per-call limit. ``EngineBoundExceeded`` where
        cel-python cannot compile the expression."""
        if self._python_program() is None:
            raise EngineBoundExceeded()
        return self._on_python(activation, None, bounded=False)

    def _python_program(self) -> Any:
        """The same expression on the pure-Python backend (compiled when first needed), or
        None where that backend cannot compile it."""
        if self._exact is None:
            try:
                self._exact = self._engine.fallback.compile(self.expression, self._declared, mixed_literals=self._mixed_literals)
            except CelCompileError:
                self._exact = False
        return self._exact or None

    def _on_python(self, activation: Mapping[str, Any], cost_limit: int | None, *, bounded: bool = True) -> Any:
        data = {name: activation[self._rename.get(name, name)] for name in self._declared
                if self._rename.get(name, name) in activation}
        return self._python_program().evaluate(data, cost_limit=cost_limit, bounded=bounded)

    @staticmethod
    def _eval(program: cel.Expression, activation: Mapping[str, Any]) -> cel.Value:
        try:
            return program.eval(data=activation)
        except (RuntimeError, TypeError, ValueError) as err:
            raise _eval_error(clean_message(str(err))) from None

    @staticmethod
    def _eval_on(program: cel.Expression, activation: cel.Activation) -> cel.Value:
        try:
            return program.eval(activation=activation)
        except (RuntimeError, TypeError, ValueError) as err:
            raise _eval_error(clean_message(str(err))) from None

    def __repr__(self) -> str:
        return f"<CelExprProgram {self.expression!r}>"


def warm_up_fallback() -> None:
    """Build what the pure-Python backend that ``cel_python_route`` answers with shares (its
    parser, its table of functions): a noticeable fraction of a second on first use. The
    server calls this once its chain is loaded, off the event loop, so that the first such
    evaluation does not stall the reviews behind it."""
    from webhook.cel.engine.cel_python import warm_up

    warm_up()


def hoisted_values(hoists: tuple[Hoist, ...], activation: Mapping[str, Any]) -> dict[str, Any] | None:
    """The hidden variables' values, or None when any selection or call would fail."""
    values, results = {}, {}
    for hoist in hoists:
        args = []
        for extractor in hoist.args:
            if extractor[0] == "const":
                args.append(extractor[1])
                continue
            if extractor[0] == "hoisted":
                args.append(results[extractor[1]])
                continue
            _, root, steps = extractor
            if root not in activation:
                return None
            value = activation[root]
            for _, key in steps:
                try:
                    value = value[key]
                except (KeyError, IndexError, TypeError):
                    return None
            args.append(value)
        overload = select_overload(hoist.overloads, args)
        if overload is None:
            return None
        try:
            results[hoist.variable] = overload.impl(*args)
        except LibraryError:
            return None
        values[hoist.variable] = to_runtime(results[hoist.variable])
    return values


_ERROR = cel.Type.ERROR
_UNBUILT = object()  # a native program not generated yet
# cel-cpp's own words for a selection or index on a value of another kind, and the dispatches
# above or of a library function given a library value of another type (see ``cel_python_route``)
_CEL_CPP_ONLY = ("Applying SELECT to non-message type", "Invalid container type", "No matching overloads found : ")
_NON_CEL_VALUE = "Non-CEL value type"
# cel-cpp's own bound: 10,000 comprehension iterations per evaluation
_ITERATION_BUDGET = "Iteration budget exceeded"


def _eval_error(message: str) -> CelEvalError:
    if message == _ITERATION_BUDGET:
        return EngineBoundExceeded()
    if message == COST_EXCEEDED:
        return CelCostExceeded()
    return CelEvalError(message)


def well_known(value: Any) -> Any:
    """``datetime``/``timedelta`` anywhere in ``value`` as protobuf Timestamp/Duration."""
    if isinstance(value, datetime.datetime):
        stamp = timestamp_pb2.Timestamp()
        stamp.FromDatetime(value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc))
        return stamp
    if isinstance(value, datetime.timedelta):
        duration = duration_pb2.Duration()
        duration.FromTimedelta(value)
        return duration
    if isinstance(value, dict):
        return {k: well_known(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [well_known(v) for v in value]
    return value


def _compile(checked: Checked, runtime: cel.Env, rename: Mapping[str, str], variables: frozenset[str],
             mixed_literals: bool, engine: CelExprEngine, known: KnownSizes) -> CelExprProgram:
    """The checked expression planned for the C++ runtime: the plain program, and the one
    with library calls on selected data hoisted when there are such calls."""
    expression, plain = checked.expression, checked.plain
    reads = free_variables(plain.checked.expr, variables | set(rename.values())) - set(rename)
    fallback = runtime.deserialize(protos.encode(plain.checked))
    native = None if plain.optional_root else plain.checked.expr
    hoisted = optimize(checked.fresh(), hoist=True, mixed_literals=mixed_literals)
    if not hoisted.hoists:
        return CelExprProgram(
            expression, fallback, optional_root=plain.optional_root, python_calls=plain.python_calls,
            cost=checked.cost, env=runtime, reads=reads, native_expr=native,
            declared=variables, rename=rename, mixed_literals=mixed_literals, engine=engine, known=known,
        )
    return CelExprProgram(
        expression,
        runtime.deserialize(protos.encode(hoisted.checked)),
        optional_root=hoisted.optional_root,
        python_calls=hoisted.python_calls,
        cost=checked.cost,
        hoists=hoisted.hoists,
        fallback=fallback,
        env=runtime,
        reads=reads,
        native_expr=native,
        declared=variables,
        rename=rename,
        mixed_literals=mixed_literals,
        engine=engine,
        known=known,
    )


class CelExprEngine:
    """The default backend with what it keeps for its life: its compiled programs (per
    expression, declarations, renames and mode), one runtime env per set of declarations, the
    rules compiled per CRD schema node (``schema_rules``), the sizes of stored objects its
    bound need not measure again (``known_sizes``), the checking step (``checker``) and the
    fallback backend (``fallback``) its programs hand evaluations to. An ``Evaluator`` owns
    one: nothing is shared between engines."""

    name = "cel-expr"

    def __init__(self) -> None:
        self.checker = Checker()
        self.known_sizes = KnownSizes()
        self._fallback: CelPythonEngine | None = None
        self.schema_rules = Kept()
        self._programs = Kept()
        self._runtime_envs = Kept()

    def compile(self, expression: str, variables: Iterable[str],
                rename: Mapping[str, str] | None = None, *, mixed_literals: bool = False) -> CelExprProgram:
        return self.compile_typed(expression, {name: cel.Type.DYN for name in variables}, rename, mixed_literals)

    def compile_typed(self, expression: str, variables: Mapping[str, cel.Type],
                      rename: Mapping[str, str] | None = None, mixed_literals: bool = False) -> CelExprProgram:
        """Compile against typed variable declarations; kept by expression and declarations.

        ``rename`` gives some variables another name at evaluation (type-checked under the
        declared name): programs of different sources that share one ``Bindings`` each read
        their own value of, say, ``params``. ``mixed_literals``: as ``Engine.compile`` takes it."""
        declarations = tuple(sorted((name, t.name()) for name, t in variables.items()))
        renamed = tuple(sorted((rename or {}).items()))
        key = (expression, declarations, renamed, mixed_literals)
        program = self._programs.get(key)
        if program is not None:
            return program
        runtime = self._runtime_envs.get(declarations)
        if runtime is None:  # two threads may both build one: the same env, one kept
            runtime = runtime_env(variables, HOIST_VARIABLES)
            self._runtime_envs.put(declarations, runtime)
        checked = self.checker.check(expression, variables, dict(renamed), mixed_literals=mixed_literals)
        program = _compile(checked, runtime, dict(renamed), frozenset(variables), mixed_literals, self,
                           self.known_sizes)
        self._programs.put(key, program)
        return program

    @property
    def fallback(self) -> CelPythonEngine:
        """The pure-Python backend (sharing the checker and the sizes), imported and built
        when a program first needs it: most processes never do, or only once ready."""
        if self._fallback is None:
            from webhook.cel.engine.cel_python import CelPythonEngine

            self._fallback = CelPythonEngine(self.checker, self.known_sizes)
        return self._fallback

    @staticmethod
    def bind(values: Mapping[str, Any]) -> Bindings:
        """Values for many evaluations, converted into CEL values once (see ``Bindings``)."""
        return Bindings(values)


ENGINE_CLASS = CelExprEngine
