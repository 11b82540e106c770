"""Reviews decoded and judged on the event loop in batches (``LoopBatch``): each review
gets its own verdict, a failing one does not take the others down, and a batch is what
one turn of the loop holds."""

from __future__ import annotations

import asyncio
import json
import threading

from webhook.server import LoopBatch

from .conftest import MODEL, ScriptedAdmitter, review, start_server, stop_server


async def test_a_batch_runs_stage_by_stage_in_arrival_order_after_the_turn_that_filled_it():
    steps = []

    def decode(item: dict) -> None:
        steps.append(("decode", item["n"]))
        if item["n"] == 1:
            raise ValueError("bad input")  # this one stops here; the others go on
        item["decoded"] = True

    def judge(item: dict) -> None:
        steps.append(("judge", item["n"]))
        if item["n"] == 2:
            raise RuntimeError("chain bug")
        item["allowed"] = item["n"] % 2 == 0

    batch = LoopBatch(decode, judge)
    futures = [batch.submit({"n": n}) for n in range(4)]
    assert steps == []  # nothing runs while the turn that submitted them does
    await asyncio.sleep(0)
    assert steps == [("decode", 0), ("decode", 1), ("decode", 2), ("decode", 3),
                     ("judge", 0), ("judge", 2), ("judge", 3)]
    assert futures[0].result() == {"n": 0, "decoded": True, "allowed": True}
    assert isinstance(futures[1].exception(), ValueError)
    assert isinstance(futures[2].exception(), RuntimeError)
    assert futures[3].result()["allowed"] is False
    later = batch.submit({"n": 4})  # a new turn, a new batch
    assert not later.done()
    await asyncio.sleep(0)
    assert later.result()["allowed"] is True and steps[-2:] == [("decode", 4), ("judge", 4)]


async def test_a_review_whose_request_went_away_is_not_processed():
    steps = []
    batch = LoopBatch(lambda item: steps.append(item))
    gone, kept = batch.submit("gone"), batch.submit("kept")
    gone.cancel()
    await asyncio.sleep(0)
    assert steps == ["kept"] and kept.result() == "kept"


async def test_concurrent_reviews_on_the_loop_each_get_their_own_answer(tmp_path, monkeypatch):
    """Sixteen reviews in flight at once over separate TLS connections, judged on the loop
    (the kind was quick last time), allowed, denied and malformed mixed: every answer
    carries its own uid, verdict and message; a malformed one gets its 400 alone."""
    admitter, sizes = ScriptedAdmitter(), []
    run = LoopBatch.run

    def counting(self: LoopBatch) -> int:
        sizes.append(run(self))
        return sizes[-1]

    monkeypatch.setattr(LoopBatch, "run", counting)
    running = await start_server(tmp_path, admitter)
    try:
        await running.post("/validate", review(MODEL))  # a quick first review: the kind goes to the loop
        on_loop = threading.current_thread().name

        def obj(i: int) -> dict:
            o = json.loads(json.dumps(MODEL))
            o["metadata"]["name"] = f"m{i}"
            if i % 3 == 0:
                o["metadata"]["annotations"] = {"test/deny": f"denied number {i}"}
            return o

        malformed = {5: b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {',
                     11: json.dumps(dict(review(obj(11)), request={"uid": "uid-11"})).encode()}

        async def send(i: int):
            session = running.session(force_close=True)
            body = malformed.get(i) or json.dumps(review(obj(i), uid=f"uid-{i}")).encode()
            async with session.post(running.url + "/validate", data=body,
                                    headers={"Content-Type": "application/json"}) as r:
                return r.status, await r.json()

        answers = await asyncio.gather(*(send(i) for i in range(16)))
        assert answers[5][0] == 400 and "malformed JSON" in answers[5][1]["message"]
        assert answers[11][0] == 400 and "request.kind: Field required" in answers[11][1]["message"]
        for i, (status, body) in enumerate(answers):
            if i in malformed:
                continue
            resp = body["response"]
            assert status == 200 and resp["uid"] == f"uid-{i}"
            assert resp["allowed"] is (i % 3 != 0)
            if i % 3 == 0:
                assert resp["status"]["message"] == f"denied number {i}"
        assert sorted(r.name for r, _ in admitter.seen[1:]) == sorted(f"m{i}" for i in range(16) if i not in malformed)
        assert set(admitter.threads[1:]) == {on_loop}
        assert sum(sizes) == 17 and max(sizes) > 1  # some arrived together: batches, not one by one
    finally:
        await stop_server(running)
