"""A did-you-mean for a document no CRD serves: its apiVersion or kind is a near miss of one
that is served (``validate``'s skip reason says so; the document stays skipped).

Near misses, best first:

- the kind served at the same version of a group one edit away (one dot-separated label changed,
  added or removed, or up to two characters: ``inference.networking.x-k8s.io/v1`` for
  ``inference.networking.k8s.io/v1``);
- the kind served in the same group at other versions (``gateway.networking.k8s.io/v1alpha2``
  HTTPRoute: ``v1`` or ``v1beta1``);
- a kind spelled in another case or one edit away (``Inferencepool``, ``Modle``).
"""

from __future__ import annotations

from typing import Iterable

from webhook.apiversion import split

__all__ = ["did_you_mean", "hint", "near_words"]


def _distance(a: str, b: str, limit: int = 2) -> int:
    """Edit distance with adjacent transpositions (optimal string alignment); ``limit + 1`` once
    it exceeds ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    rows = [list(range(len(b) + 1))]
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, rows[-2][j - 2] + 1)
            row.append(cost)
        rows.append(row)
    return min(rows[-1][-1], limit + 1)


def _groups_close(a: str, b: str) -> bool:
    if a == b or not a or not b:
        return False
    la, lb = a.split("."), b.split(".")
    if len(la) == len(lb) and sum(x != y for x, y in zip(la, lb)) == 1:
        return True
    shorter, longer = sorted((la, lb), key=len)
    if len(longer) - len(shorter) == 1 and any(longer[:i] + longer[i + 1:] == shorter for i in range(len(longer))):
        return True
    return _distance(a, b) <= 2


def did_you_mean(api_version: str, kind: str, served: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The served ``(apiVersion, kind)`` pairs ``api_version``/``kind`` most likely meant, best
    first (at most three of the best rank); empty when none is near."""
    group, version = split(api_version)
    ranked: list[tuple[int, tuple[str, str]]] = []
    for served_api, served_kind in served:
        if (served_api, served_kind) == (api_version, kind):
            continue
        served_group, served_version = split(served_api)
        if served_kind == kind:
            kind_cost = 0
        elif served_kind.lower() == kind.lower():
            kind_cost = 1
        elif _distance(served_kind.lower(), kind.lower(), 1) <= 1:  # TCPRoute is not HTTPRoute
            kind_cost = 2
        else:
            continue
        if served_group == group:
            group_cost = 0
        elif _groups_close(served_group, group):
            group_cost = 1
        else:
            continue
        version_cost = 0 if served_version == version else 2
        if group_cost and version_cost:  # two things wrong at once: no longer a near miss
            continue
        ranked.append((kind_cost + group_cost + version_cost, (served_api, served_kind)))
    if not ranked:
        return []
    from webhook.schema.bundled import version_priority

    best = min(cost for cost, _ in ranked)
    found = {pair for cost, pair in ranked if cost == best}
    return sorted(found, key=lambda p: (version_priority(split(p[0])[1]), p), reverse=True)[:3]


def hint(api_version: str, kind: str, served: Iterable[tuple[str, str]]) -> str:
    """``"; did you mean X?"`` (``X``: the apiVersion, with the kind when that differs), or ``""``."""
    found = did_you_mean(api_version, kind, served)
    if not found:
        return ""
    names = [api if served_kind == kind else f"{api} {served_kind}" for api, served_kind in found]
    return f"; did you mean {' or '.join(names)}?"


def near_words(word: str, known: Iterable[str]) -> list[str]:
    """The words of ``known`` ``word`` most likely meant, best first: the same in another case,
    then one or two edits away (``InferencePools`` for ``InferencePool``, ``Modle`` for ``Model``);
    a group one dot-separated label away (``llm-d.io`` for ``llm-d.ai``). At most three."""
    ranked: list[tuple[int, str]] = []
    for candidate in set(known):
        if candidate == word:
            continue
        if candidate.lower() == word.lower():
            ranked.append((0, candidate))
        elif _distance(candidate.lower(), word.lower()) <= 2 or ("." in word and _groups_close(candidate, word)):
            ranked.append((1 + _distance(candidate.lower(), word.lower(), 8), candidate))
    return [name for _, name in sorted(ranked)[:3]]
