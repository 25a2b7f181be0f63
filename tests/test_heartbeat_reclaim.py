"""A live worker's heartbeat frees a killed worker's judge slots itself (issue 26 item 3).

In the chaos bench every thread of the only worker waited for limiter slots still held by
killed workers, and heal_runs (which frees them) waited in the queue behind those tasks:
runs stood still until the slots expired, 300 s later. The heartbeat's own thread now
calls `reclaim` once every stall period.
"""

from __future__ import annotations

import threading

from scoring.runs.services import heartbeat


def test_the_heartbeat_thread_reclaims_once_a_stall_period(monkeypatch):
    monkeypatch.setattr(heartbeat, "report_run", lambda run_id: None)
    monkeypatch.setattr(heartbeat, "renew_leases", lambda run_id: 0)
    monkeypatch.setattr(heartbeat, "heartbeat_seconds", lambda: 0.001)
    monkeypatch.setattr(heartbeat, "stall_seconds", lambda: 0)
    called = threading.Event()
    seen = []

    def reclaim(now):
        seen.append(now)
        called.set()
        return 2

    with heartbeat.RunHeartbeat(1, reclaim=reclaim):
        assert called.wait(timeout=10), "the heartbeat never reclaimed"
    assert seen and all(s.tzinfo is not None for s in seen)


def test_no_reclaim_before_a_stall_period(monkeypatch):
    monkeypatch.setattr(heartbeat, "report_run", lambda run_id: None)
    beats = threading.Event()

    def renew(run_id):
        beats.set()
        return 0

    monkeypatch.setattr(heartbeat, "renew_leases", renew)
    monkeypatch.setattr(heartbeat, "heartbeat_seconds", lambda: 0.001)
    monkeypatch.setattr(heartbeat, "stall_seconds", lambda: 3600)
    calls = []
    with heartbeat.RunHeartbeat(1, reclaim=calls.append):
        assert beats.wait(timeout=10)
    assert calls == []


def test_heal_runs_and_the_heartbeat_free_slots_through_one_function():
    from scoring.runs.services import ledger, runs

    assert runs.free_dead_limiter_slots is ledger.free_dead_limiter_slots
