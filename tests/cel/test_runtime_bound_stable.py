"""``KnownSizes``: an engine sizes a stored object once for its runtime cost bound, with the
same sizes as walking it every time; a changed object is sized anew.

The cluster state stores a new object for every change (``ObjectStore``: a list, a watch
event, a put); the engine keeps each remembered object alive, so no other object can take
its identity while its sizes are kept, and a changed one never reads the sizes of the
version it replaced. Nothing stops a reader from changing a stored object in place: its
sizes hold only while its JSON text is the one remembered, so it is measured again."""

from __future__ import annotations

import pytest

from webhook.cel import Evaluator, EngineBoundExceeded
from webhook.cel.cost.bound import KnownSizes, measure
from webhook.state.memory import MemoryState

# nested loops over the parts of a string: the bound grows with the string's length squared
# (``split`` gives at most length + 1 parts), though a string without commas has one part
NESTED = "self.spec.text.split(',').all(a, self.spec.text.split(',').all(b, a == b))"
CLASS = {"apiVersion": "ai.deckhouse.io/v1alpha1", "kind": "InferenceServiceClass", "metadata": {"name": "c"}}


def _state_object(items: int, text: str) -> dict:
    return {"metadata": {"name": "c", "labels": {"a": text}}, "spec": {"items": list(range(items))}}


def test_a_remembered_object_measures_as_walked():
    small, large = _state_object(3, "x" * 40), _state_object(500, "y")
    activation = [{"spec": {"n": "abc"}}, {"classes": [small, large]}]
    walked = measure(activation)
    known = KnownSizes()
    known.remember(small)
    known.remember(large)
    assert measure(activation, known) == walked == (500, 40)


def test_only_the_same_object_is_recognised():
    known = KnownSizes()
    remembered = _state_object(2, "z")
    known.remember(remembered)
    equal_but_new = _state_object(900, "z")  # a different dict: walked, not taken from the table
    assert measure([equal_but_new], known) == (900, 1)


def test_an_object_replaced_in_the_state_never_reuses_the_bound_of_the_one_it_replaced():
    evaluator = Evaluator("cel-expr")
    program = evaluator.compile(NESTED, ["self"])
    state = MemoryState([{**CLASS, "spec": {"text": "short"}}])
    stored = state.get(CLASS["apiVersion"], CLASS["kind"], "c")
    evaluator.engine.known_sizes.remember(stored)
    assert program.evaluate({"self": stored}) is True

    changed = {**CLASS, "spec": {"text": "x" * 5000}}  # one part: the evaluation itself is tiny
    state.put(changed)
    replaced = state.get(CLASS["apiVersion"], CLASS["kind"], "c")
    assert replaced is not stored  # a change is a new object, so a new key
    evaluator.engine.known_sizes.remember(replaced)
    with pytest.raises(EngineBoundExceeded):  # measured anew: 5000² is past the per-call limit
        program.evaluate({"self": replaced})
    assert program.evaluate({"self": stored}) is True  # the old version, still itself


def test_an_object_put_again_after_its_owner_mutated_it_is_measured_anew():
    evaluator = Evaluator("cel-expr")
    program = evaluator.compile(NESTED, ["self"])
    mine = {**CLASS, "spec": {"text": "short"}}
    state = MemoryState([mine])
    evaluator.engine.known_sizes.remember(state.get(CLASS["apiVersion"], CLASS["kind"], "c"))
    mine["spec"]["text"] = "x" * 5000  # the writer's own dict, mutated and written again
    state.put(mine)
    stored = state.get(CLASS["apiVersion"], CLASS["kind"], "c")
    evaluator.engine.known_sizes.remember(stored)
    with pytest.raises(EngineBoundExceeded):
        program.evaluate({"self": stored})


def test_a_stored_object_changed_in_place_never_reuses_its_old_size():
    evaluator = Evaluator("cel-expr")
    program = evaluator.compile(NESTED, ["self"])
    state = MemoryState([{**CLASS, "spec": {"text": "short"}}])
    stored = state.get(CLASS["apiVersion"], CLASS["kind"], "c")
    evaluator.engine.known_sizes.remember(stored)
    assert program.evaluate({"self": stored}) is True
    stored["spec"]["text"] = "x" * 5000  # in place, behind the state's back: the same dict
    assert state.get(CLASS["apiVersion"], CLASS["kind"], "c") is stored
    evaluator.engine.known_sizes.remember(stored)  # as a lookup hands it over again
    with pytest.raises(EngineBoundExceeded):  # 5000² is past the per-call limit
        program.evaluate({"self": stored})
    stored["spec"]["text"] = "short"  # and back: the bound follows again
    assert program.evaluate({"self": stored}) is True
    nested = _state_object(3, "a")
    known = KnownSizes()
    known.remember(nested)
    nested["spec"]["items"].extend(range(700))  # a list deep inside, grown in place
    assert measure([{"lookups": [nested]}], known) == measure([{"lookups": [nested]}]) == (703, 1)


def test_an_object_nobody_declared_stored_is_measured_on_every_evaluation():
    program = Evaluator("cel-expr").compile(NESTED, ["self"])
    review_object = {**CLASS, "spec": {"text": "short"}}
    assert program.evaluate({"self": review_object}) is True
    review_object["spec"]["text"] = "x" * 5000  # mutated in place between two evaluations
    with pytest.raises(EngineBoundExceeded):
        program.evaluate({"self": review_object})


def test_engines_keep_their_own_sizes():
    first, second = Evaluator("cel-expr"), Evaluator("cel-expr")
    obj = _state_object(10, "a")
    first.engine.known_sizes.remember(obj)
    assert id(obj) in first.engine.known_sizes.entries and id(obj) not in second.engine.known_sizes.entries
    assert first.without("native").engine.known_sizes is first.engine.known_sizes  # one engine, one table
