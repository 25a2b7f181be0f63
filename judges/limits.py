"""Limit calls to one judge across every worker: concurrency and requests per minute, in Redis.

- Concurrency: a semaphore of expiring leases, a sorted set `<prefix>:<judge>:leases`
  (member = lease id, score = expiry in ms). Acquiring drops expired leases first,
  so a worker that dies holding a lease frees it after `lease_seconds`.
- Requests per minute: a sliding-window log, a sorted set `<prefix>:<judge>:rpm`
  (member = request id, score = time in ms); a request is admitted while fewer
  than `rpm` entries fall inside the last `window_seconds`.
Both checks run as Lua scripts, so they are atomic on the server, and use the
Redis server clock (TIME), so workers on machines with skewed clocks agree.
With no Redis client (None) `get_limiter` returns a NullLimiter that admits everything.

Every lease id starts with its process's name, "<host>:<pid>/" (`process_holder`), so a
dead process's slots can be freed before they expire (`free_dead_slots`).
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import time
import uuid
import weakref
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from .types import JudgeUnavailable

DEFAULT_PREFIX = "snaglist:judges"

_ACQUIRE_LEASE = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + 1000)
  return 0
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.max(1, tonumber(first[2]) - now)
"""

_EXTEND_LEASE = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not expiry or tonumber(expiry) <= now then
  redis.call('ZREM', KEYS[1], ARGV[2])
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) + 1000)
return 1
"""

_TAKE_RPM_TOKEN = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window + 1000)
  return 0
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.max(1, tonumber(first[2]) + window - now)
"""


# The event loop's batched lease exchange (AsyncLeaseBroker): release this process's finished
# leases, then grant up to `want` new ones, no more than its fair share of the cap while other
# processes also wait. KEYS: leases, demand. ARGV: max, lease ms, broker token, want, held
# (leases this broker holds after the releases), the number n of the first new lease, then
# the released ids. New leases are named "<token>:<n>", "<token>:<n + 1>", ... (the broker's
# own counter, so only granted ids are ever made). The demand set holds the brokers that
# asked for leases in the last second.
# Returns {granted count, ms to wait before asking again (0 if nothing is held elsewhere),
# the caller's fair share: ceil(cap / brokers waiting)}.
_EXCHANGE_LEASES = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local cap, lease_ms, token = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local want, held, first = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
for i = 7, #ARGV do redis.call('ZREM', KEYS[1], ARGV[i]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - 1000)
if want > 0 then redis.call('ZADD', KEYS[2], now, token) else redis.call('ZREM', KEYS[2], token) end
redis.call('PEXPIRE', KEYS[2], 2000)
local waiting = math.max(1, redis.call('ZCARD', KEYS[2]))
local free = cap - redis.call('ZCARD', KEYS[1])
local fair = math.ceil(cap / waiting)
local grant = math.max(0, math.min(want, free, fair - held))
for i = 0, grant - 1 do redis.call('ZADD', KEYS[1], now + lease_ms, token .. ':' .. (first + i)) end
if grant > 0 then redis.call('PEXPIRE', KEYS[1], lease_ms + 1000) end
local wait = 0
if grant < want then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  wait = first[2] and math.max(1, tonumber(first[2]) - now) or 1
end
return {grant, wait, fair}
"""


def process_holder() -> str:
    """Return this process's name, "<host>:<pid>", computed at each call (so a forked pool
    process names itself): the prefix of its lease ids, and what its database leases name
    as their holder."""
    return f"{socket.gethostname()}:{os.getpid()}"


def free_dead_slots(
    redis_client: Any, alive: Callable[[str], bool], *, prefix: str = DEFAULT_PREFIX
) -> int:
    """Remove the concurrency leases of processes that are no longer alive from every judge's
    lease set under `prefix`; return how many were removed.

    alive(holder) decides for a holder "<host>:<pid>" (the caller knows which processes
    still work: those renewing leases). Lease ids without a holder prefix (and the
    "unlimited" id) are left to expire. Without this a dead worker's slot stays taken until
    its expiry (lease_seconds, 300 s by default): with concurrency 1 the judge stalls that
    long.
    """
    removed = 0
    for key in redis_client.scan_iter(match=f"{prefix}:*:leases"):
        dead = []
        for member in redis_client.zrange(key, 0, -1):
            lease_id = member.decode() if isinstance(member, bytes) else str(member)
            holder, slash, _ = lease_id.partition("/")
            if slash and not alive(holder):
                dead.append(member)
        if dead:
            removed += int(redis_client.zrem(key, *dead))
    return removed


class LimiterTimeout(JudgeUnavailable):
    """Raise when a concurrency slot or an RPM token did not free up within the timeout."""


class NullLimiter:
    """Admit every call at once: the limiter used when no Redis is configured."""

    @contextmanager
    def slot(self, timeout: float | None = None) -> Iterator[None]:
        """Yield immediately."""
        yield

    @asynccontextmanager
    async def aslot(self, timeout: float | None = None) -> AsyncIterator[None]:
        """Yield immediately (the event-loop twin of `slot`)."""
        yield

    def keys(self) -> list[str]:
        """Return the Redis keys this limiter uses: none."""
        return []


class RedisLimiter:
    """Cap one judge's concurrent calls and requests per minute across all workers.

    redis_client: a `redis.Redis` (the caller passes `redis.Redis.from_url(settings.REDIS_URL)`).
    max_concurrency / rpm: None or 0 disables that limit.
    lease_seconds: how long a held slot survives a worker that died without releasing it;
    keep it above the judge call's timeout (plus retries' sleeps).
    `sleep`, `asleep` (its event-loop twin) and `rng` are injectable for tests.
    """

    def __init__(
        self,
        redis_client: Any,
        judge_key: str,
        *,
        max_concurrency: int | None = None,
        rpm: int | None = None,
        lease_seconds: float = 300.0,
        window_seconds: float = 60.0,
        prefix: str = DEFAULT_PREFIX,
        poll_seconds: float = 0.05,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        asleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not judge_key:
            raise ValueError("judge_key must not be empty")
        self.redis = redis_client
        self.max_concurrency = max_concurrency or None
        self.rpm = rpm or None
        self.lease_ms = max(1, int(lease_seconds * 1000))
        self.window_ms = max(1, int(window_seconds * 1000))
        self.lease_key = f"{prefix}:{judge_key}:leases"
        self.rpm_key = f"{prefix}:{judge_key}:rpm"
        self.poll_seconds = poll_seconds
        self.sleep = sleep
        self.asleep = asleep
        self.rng = rng or random.Random()
        self._acquire_lease = redis_client.register_script(_ACQUIRE_LEASE)
        self._extend_lease = redis_client.register_script(_EXTEND_LEASE)
        self._take_rpm = redis_client.register_script(_TAKE_RPM_TOKEN)
        self._exchange = redis_client.register_script(_EXCHANGE_LEASES)
        # One broker per event loop, forgotten with its loop (an id() could be reused by a
        # later loop, and a broker's event and task belong to the loop that made them).
        self._brokers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def keys(self) -> list[str]:
        """Return the Redis keys this limiter writes."""
        return [self.lease_key, self.lease_key + ":demand", self.rpm_key]

    def try_acquire_lease(self) -> tuple[str | None, float]:
        """Return (lease id, 0) if a concurrency slot was free, else (None, seconds to wait hint)."""
        if self.max_concurrency is None:
            return "unlimited", 0.0
        lease_id = f"{process_holder()}/{uuid.uuid4().hex}"
        wait_ms = int(
            self._acquire_lease(
                keys=[self.lease_key], args=[self.max_concurrency, self.lease_ms, lease_id]
            )
        )
        return (lease_id, 0.0) if wait_ms == 0 else (None, wait_ms / 1000.0)

    def extend_lease(self, lease_id: str) -> bool:
        """Push a held lease's expiry lease_seconds from now; False if it had already expired."""
        if self.max_concurrency is None:
            return True
        return bool(self._extend_lease(keys=[self.lease_key], args=[self.lease_ms, lease_id]))

    def release_lease(self, lease_id: str) -> None:
        """Free a concurrency slot (a no-op if the lease already expired)."""
        if self.max_concurrency is not None:
            self.redis.zrem(self.lease_key, lease_id)

    def exchange_leases(
        self, token: str, want: int, held: int, released: list[str], first: int
    ) -> tuple[int, float, int]:
        """Release `released`, then grant up to `want` leases within the cap and the caller's
        fair share, named "<token>:<first>", "<token>:<first + 1>", ...; return (granted, ms to
        wait before asking again, fair share: the most leases the caller may hold while the
        brokers now waiting also wait)."""
        granted, wait_ms, fair = self._exchange(
            keys=[self.lease_key, self.lease_key + ":demand"],
            args=[self.max_concurrency, self.lease_ms, token, want, held, first, *released],
        )
        return int(granted), float(wait_ms), int(fair)

    def try_take_token(self) -> float:
        """Take one request from the RPM window; return 0.0 if admitted, else seconds to wait."""
        if self.rpm is None:
            return 0.0
        wait_ms = int(
            self._take_rpm(keys=[self.rpm_key], args=[self.rpm, self.window_ms, uuid.uuid4().hex])
        )
        return wait_ms / 1000.0

    def _wait(self, delay: float, deadline: float | None) -> None:
        self.sleep(self._checked(delay, deadline))

    @staticmethod
    def _checked(delay: float, deadline: float | None) -> float:
        """Return `delay`, or raise LimiterTimeout if waiting it would pass the deadline."""
        if deadline is not None and time.monotonic() + delay > deadline:
            raise LimiterTimeout("judge rate limit: no slot or token within the timeout")
        return delay

    def _lease_wait(self, hint: float) -> float:
        # Slots free up whenever a call ends, not only at lease expiry: poll, jittered
        # so waiting workers do not retry in lockstep.
        return min(hint, self.poll_seconds) * (0.5 + self.rng.random())

    def _token_wait(self, hint: float) -> float:
        # The hint is exact: when the oldest request leaves the window.
        return hint + self.poll_seconds * self.rng.random()

    @contextmanager
    def slot(self, timeout: float | None = None) -> Iterator[None]:
        """Hold one concurrency slot and one RPM token for the duration of a call.

        Blocks until both are available; raises LimiterTimeout after `timeout` seconds
        (None waits forever). The slot is released on exit, even on error.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            lease_id, hint = self.try_acquire_lease()
            if lease_id is not None:
                break
            self._wait(self._lease_wait(hint), deadline)
        try:
            while (hint := self.try_take_token()) != 0.0:
                self._wait(self._token_wait(hint), deadline)
            yield
        finally:
            self.release_lease(lease_id)

    @asynccontextmanager
    async def aslot(self, timeout: float | None = None) -> AsyncIterator[None]:
        """`slot` for a coroutine: the same cap, tokens and timeout, the event loop's other
        calls going on while it waits. Leases come from this loop's AsyncLeaseBroker (batched,
        one Redis round trip per turn of the loop, not per call); RPM tokens as in `slot`.
        The Redis round trips are the sync client's (well under a millisecond on a local
        network, and cheaper in CPU than an asyncio client's).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        broker = None
        lease_id = None
        if self.max_concurrency is not None:
            loop = asyncio.get_running_loop()
            broker = self._brokers.get(loop)
            if broker is None:
                broker = self._brokers[loop] = AsyncLeaseBroker(self)
            lease_id = await broker.acquire(deadline)
        try:
            while (hint := self.try_take_token()) != 0.0:
                await self.asleep(self._checked(self._token_wait(hint), deadline))
            yield
        finally:
            if broker is not None and lease_id is not None:
                broker.release(lease_id)


def _expire(future: asyncio.Future) -> None:
    """Fail a lease request that reached its deadline (a no-op if it was granted)."""
    if not future.done():
        future.set_exception(LimiterTimeout("judge rate limit: no slot within the timeout"))


class AsyncLeaseBroker:
    """Concurrency leases for one RedisLimiter's calls on one event loop, in batches.

    A call awaits `acquire()` and hands its lease back with `release()`. Whatever was asked
    and handed back during one turn of the loop goes to Redis as ONE exchange
    (_EXCHANGE_LEASES). While other workers wait too, each gets at most its fair share of
    the cap (ceil(cap / brokers waiting)), so no worker is starved; the set of leases, their
    expiry (a dead worker's slots free up after lease_seconds) and the cap are the same as
    for `RedisLimiter.slot`. Waiting callers are served first come, first served.

    A lease handed back while a call here waits passes straight to it, with no Redis round
    trip, when the broker holds no more than the fair share Redis gave it within the last
    `fresh_seconds` (2 x poll_seconds: a broker with callers waiting asks that often) and the
    lease is younger than half of lease_seconds. Otherwise it goes back through Redis, so a
    worker that arrives later gets its share within one poll of the others.
    """

    def __init__(self, limiter: RedisLimiter) -> None:
        self.limiter = limiter
        self.token = f"{process_holder()}/{uuid.uuid4().hex}"
        self._issued = 0  # lease ids are "<token>:<n>": unique without a uuid4 per id
        self.held = 0
        self.share = 0  # the fair share Redis reported at the last exchange
        self.exchanged_at = float("-inf")  # time.monotonic() of the last exchange
        self.fresh_seconds = 2 * limiter.poll_seconds
        self.keep_seconds = limiter.lease_ms / 2000
        self.granted_at: dict[str, float] = {}
        self.waiters: deque[asyncio.Future] = deque()
        self.released: list[str] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def acquire(self, deadline: float | None) -> str:
        """Return a lease id; raise LimiterTimeout if none is granted by `deadline`
        (time.monotonic(); None waits for ever). A lease granted just as the caller was
        cancelled is handed back, not lost."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        # With callers already waiting the broker is polling (every poll_seconds or so) and
        # the new one is asked for then: no extra exchange per call handed to the loop.
        polling = bool(self.waiters)
        self.waiters.append(future)
        self._kick(wake=not polling)
        # The deadline is one timer on the loop that fails the future (cheaper per call than
        # asyncio.wait_for's extra future and callbacks).
        timer = None
        if deadline is not None:
            timer = loop.call_later(max(0.0, deadline - time.monotonic()), _expire, future)
        try:
            return await future
        except BaseException:
            self._hand_back(future)
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def _hand_back(self, future: asyncio.Future) -> None:
        if not future.done():
            future.cancel()
        elif not future.cancelled() and future.exception() is None:
            self.release(future.result())

    def release(self, lease_id: str) -> None:
        """Hand a lease back: straight to a caller waiting here (see the class), or to Redis
        with the next exchange, in this turn of the loop."""
        now = time.monotonic()
        if (
            self.held <= self.share
            and now - self.exchanged_at < self.fresh_seconds
            and now - self.granted_at.get(lease_id, float("-inf")) < self.keep_seconds
        ):
            while self.waiters:
                waiter = self.waiters.popleft()
                if not waiter.done():
                    waiter.set_result(lease_id)
                    return
        self.granted_at.pop(lease_id, None)
        self.released.append(lease_id)
        self._kick()

    def _kick(self, wake: bool = True) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        elif wake:
            self._wake.set()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0)  # let this turn's acquires and releases gather
            while self.waiters and self.waiters[0].done():
                self.waiters.popleft()  # timed out
            want = sum(1 for f in self.waiters if not f.done())
            if not want and not self.released:
                return
            released, self.released = self.released, []
            self.held -= len(released)
            first = self._issued
            granted, wait_ms, self.share = self.limiter.exchange_leases(
                self.token, want, self.held, released, first
            )
            self._issued += granted
            now = self.exchanged_at = time.monotonic()
            self.held += granted
            for lease_id in (f"{self.token}:{n}" for n in range(first, first + granted)):
                self.granted_at[lease_id] = now
                while self.waiters and self.waiters[0].done():
                    self.waiters.popleft()
                if self.waiters:
                    self.waiters.popleft().set_result(lease_id)
                else:  # its caller gave up meanwhile
                    self.granted_at.pop(lease_id)
                    self.released.append(lease_id)
            if want > granted and not self.released:
                # Wait for a slot of ours to go back to Redis, or poll again (jittered) for
                # one freed elsewhere; a release through Redis wakes us at once.
                self._wake.clear()
                delay = self.limiter._lease_wait(wait_ms / 1000.0)
                timer = asyncio.get_running_loop().call_later(delay, self._wake.set)
                try:
                    await self._wake.wait()
                finally:
                    timer.cancel()


def get_limiter(
    redis_client: Any | None,
    judge_key: str,
    *,
    max_concurrency: int | None = None,
    rpm: int | None = None,
    **kwargs: Any,
) -> RedisLimiter | NullLimiter:
    """Return a RedisLimiter, or a NullLimiter when there is no Redis client or no limit to keep."""
    if redis_client is None or not (max_concurrency or rpm):
        return NullLimiter()
    return RedisLimiter(redis_client, judge_key, max_concurrency=max_concurrency, rpm=rpm, **kwargs)
