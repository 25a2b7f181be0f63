"""One asyncio event loop per process, on a daemon thread, for judge calls made from sync code.

Judge calls are I/O-bound: one event loop keeps dozens of them in flight for about 1 ms of
CPU each (the SDKs' async clients over aiohttp), where a thread per call spends most of its
CPU handing the GIL around. Sync code (a Celery task, its Django ORM work) submits coroutines
with `submit(coro)` and gets a concurrent.futures.Future back; the loop thread never touches
the database.

The loop is made lazily and again after a fork (the prefork pool's children do not inherit
threads), so importing this module starts nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_pid: int | None = None


def judge_loop() -> asyncio.AbstractEventLoop:
    """Return this process's judge event loop, starting its daemon thread on first use."""
    global _loop, _thread, _pid
    with _lock:
        if _loop is None or _pid != os.getpid() or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="judge-io", daemon=True)
            thread.start()
            _loop, _thread, _pid = loop, thread, os.getpid()
        return _loop


def submit(coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
    """Schedule `coro` on the judge loop; return a Future for its result (thread-safe)."""
    return asyncio.run_coroutine_threadsafe(coro, judge_loop())


def run(coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
    """Run `coro` on the judge loop and wait for its result (for sync callers; not from the loop).

    Raises whatever the coroutine raises, or TimeoutError after `timeout` seconds.
    """
    return submit(coro).result(timeout)


def start_all(
    coros: list[Coroutine[Any, Any, Any]],
    on_done: Any,
    tasks: list[asyncio.Task],
) -> None:
    """Start coroutines on the judge loop with ONE wake-up of its thread (thread-safe).

    on_done(index, task) is called on the loop's thread as each finishes (read its
    result() / exception() from any thread afterwards). Each task is appended to `tasks`
    as it starts, so the caller can `cancel_all(tasks)`.
    """

    def start() -> None:
        for index, coro in enumerate(coros):
            task = asyncio.ensure_future(coro)
            task.add_done_callback(lambda t, i=index: on_done(i, t))
            tasks.append(task)

    judge_loop().call_soon_threadsafe(start)


def cancel_all(tasks: list[asyncio.Task]) -> None:
    """Cancel the tasks `start_all` started that have not finished (thread-safe)."""

    def cancel() -> None:
        for task in tasks:
            task.cancel()

    judge_loop().call_soon_threadsafe(cancel)
