"""``remember_stable``: a stored object is sized once for the runtime cost bound, with the
same sizes as walking it every time."""

from __future__ import annotations

from webhook.cel.cost.bound import measure, remember_stable


def _state_object(items: int, text: str) -> dict:
    return {"metadata": {"name": "c", "labels": {"a": text}}, "spec": {"items": list(range(items))}}


def test_a_remembered_object_measures_as_walked():
    small, large = _state_object(3, "x" * 40), _state_object(500, "y")
    activation = [{"spec": {"n": "abc"}}, {"classes": [small, large]}]
    walked = measure(activation)
    remember_stable(small)
    remember_stable(large)
    assert measure(activation) == walked == (500, 40)


def test_only_the_same_object_is_recognised():
    remembered = _state_object(2, "z")
    remember_stable(remembered)
    equal_but_new = _state_object(900, "z")  # a different dict: walked, not taken from the cache
    assert measure([equal_but_new]) == (900, 1)
