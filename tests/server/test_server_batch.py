"""Reviews judged on the event loop in batches (``LoopBatch``): each review gets its own
verdict, a failing one does not take the others down, and a batch is what one turn of the
loop holds."""

from __future__ import annotations

import asyncio
import json
import threading

from webhook.admission.review import AdmissionResult
from webhook.server import LoopBatch

from .conftest import ScriptedAdmitter, review, start_server
from .test_server_http import MODEL


async def test_a_batch_is_judged_after_the_turn_that_filled_it_in_arrival_order():
    batch, judged = LoopBatch(), []

    def admit(n: int):
        def run() -> AdmissionResult:
            judged.append(n)
            if n == 1:
                raise RuntimeError("chain bug")
            return AdmissionResult(allowed=n % 2 == 0)
        return run

    futures = [batch.judge(admit(n)) for n in range(4)]
    assert judged == []  # nothing judged while the turn that queued them runs
    await asyncio.sleep(0)
    assert judged == [0, 1, 2, 3]
    assert [f.result().allowed for f in (futures[0], futures[2], futures[3])] == [True, True, False]
    assert isinstance(futures[1].exception(), RuntimeError)  # its handler answers 500; the others are judged
    later = batch.judge(admit(4))  # a new turn, a new batch
    assert not later.done()
    await asyncio.sleep(0)
    assert later.result().allowed is True and judged[-1] == 4


async def test_a_review_whose_request_went_away_is_not_judged():
    batch, judged = LoopBatch(), []
    gone = batch.judge(lambda: judged.append("gone") or AdmissionResult(allowed=True))
    kept = batch.judge(lambda: judged.append("kept") or AdmissionResult(allowed=True))
    gone.cancel()
    await asyncio.sleep(0)
    assert judged == ["kept"] and kept.result().allowed


async def test_concurrent_reviews_on_the_loop_each_get_their_own_answer(tmp_path):
    """Sixteen reviews in flight at once over separate TLS connections, judged on the loop
    (the kind was quick last time), allowed and denied mixed: every answer carries its own
    uid, verdict and message."""
    admitter = ScriptedAdmitter()
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

        async def send(i: int):
            session = running.session(force_close=True)
            async with session.post(running.url + "/validate", json=review(obj(i), uid=f"uid-{i}")) as r:
                return r.status, await r.json()

        answers = await asyncio.gather(*(send(i) for i in range(16)))
        for i, (status, body) in enumerate(answers):
            resp = body["response"]
            assert status == 200 and resp["uid"] == f"uid-{i}"
            assert resp["allowed"] is (i % 3 != 0)
            if i % 3 == 0:
                assert resp["status"]["message"] == f"denied number {i}"
        assert sorted(r.name for r, _ in admitter.seen[1:]) == sorted(f"m{i}" for i in range(16))
        assert set(admitter.threads[1:]) == {on_loop}
    finally:
        for s in running.sessions:
            await s.close()
        await running.runner.cleanup()
