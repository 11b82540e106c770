"""The work queue: de-duplication, no key in two workers, delayed and rate-limited adds."""

from __future__ import annotations

import asyncio

import pytest

from webhook.controller.workqueue import ShutDown, WorkQueue


async def test_a_key_is_queued_once():
    queue = WorkQueue()
    for key in ("a", "b", "a", "a"):
        queue.add(key)
    assert len(queue) == 2
    assert [await queue.get(), await queue.get()] == ["a", "b"]


async def test_a_key_added_while_processing_comes_back_after_done():
    queue = WorkQueue()
    queue.add("a")
    key = await queue.get()
    queue.add("a")  # changed again while a worker holds it
    assert len(queue) == 0  # not handed to a second worker
    queue.done(key)
    assert len(queue) == 1 and await queue.get() == "a"
    queue.done("a")
    assert queue.idle


async def test_add_after_keeps_the_earliest_and_rate_limit_doubles():
    queue = WorkQueue(base_delay=0.01, max_delay=0.04)
    queue.add_after("a", 0.5)
    queue.add_after("a", 0.02)
    assert await asyncio.wait_for(queue.get(), 0.3) == "a"
    queue.done("a")
    assert [queue.add_rate_limited("b") for _ in range(4)] == [0.01, 0.02, 0.04, 0.04]
    queue.forget("b")
    assert queue.failures("b") == 0


async def test_shutdown_wakes_waiting_workers():
    queue = WorkQueue()
    waiter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.shut_down()
    with pytest.raises(ShutDown):
        await waiter
    queue.add("late")  # ignored after shutdown
    assert len(queue) == 0
