"""Each pytest-xdist worker gets its own Redis database (tests/xdist_isolation.py)."""

from __future__ import annotations

import pytest

from tests.xdist_isolation import worker_redis_url


def test_each_worker_moves_to_its_own_database_past_the_base():
    assert worker_redis_url("redis://127.0.0.1:6379/3", "gw0") == "redis://127.0.0.1:6379/4"
    assert worker_redis_url("redis://127.0.0.1:6379/3", "gw1") == "redis://127.0.0.1:6379/5"
    assert worker_redis_url("redis://127.0.0.1:6379", "gw0") == "redis://127.0.0.1:6379/1"
    assert worker_redis_url("redis://:pw@h:6380/15", "gw0") == "redis://:pw@h:6380/0"


def test_a_name_that_is_not_a_worker_id_is_refused():
    with pytest.raises(ValueError, match="not an xdist worker id: 'master'"):
        worker_redis_url("redis://127.0.0.1:6379/0", "master")
