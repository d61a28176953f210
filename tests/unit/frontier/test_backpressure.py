"""The local runner's backpressure: no key starts a lease while the process holds its limit of
fetched results without a row (``transforms.frontier.drain``); a key that may not lease looks
again soon, without decoding its head, and leases as soon as it may."""

from __future__ import annotations

import pytest

from tests.unit.frontier.test_chained_leases import ready, url
from transforms.frontier import drain
from transforms.frontier.leasing import NOT_ALLOWED_RECHECK


@pytest.fixture(autouse=True)
def fresh_counts():
    drain.reset()
    yield
    drain.set_backlog_limit(0)
    drain.reset()


def test_the_backlog_limit_counts_results_without_a_row():
    assert not drain.backlogged()  # no limit: never
    drain.note_emitted(5)
    assert not drain.backlogged()
    drain.set_backlog_limit(5)
    assert drain.backlogged()
    drain.note_settled(1)
    assert not drain.backlogged() and drain.unsettled() == 4
    drain.set_backlog_limit(0)
    drain.note_emitted(100)
    assert not drain.backlogged()
    with pytest.raises(ValueError):
        drain.set_backlog_limit(-1)


def test_a_key_that_may_not_lease_waits_and_leases_once_it_may():
    d = ready(12)
    first, second = d.leases[-2:]
    started = len(d.leases)
    d.answer(at=0.1, lease=first)
    d.timer(0.11, allowed=False)  # harvests the first; nothing is chained after the second
    assert d.state.lease.lease_id == second.lease_id and d.state.next_lease is None
    d.answer(at=0.2, lease=second)
    d.timer(0.21, allowed=False)  # harvests the second; no new lease
    assert len(d.leases) == started and d.state.lease is None
    assert d.state.head_size == 4 and d.timer_at == pytest.approx(0.21 + NOT_ALLOWED_RECHECK)
    d.timer(0.71)
    assert [r.url for r in d.leases[-2].requests + d.leases[-1].requests] == [
        url(i) for i in range(8, 12)]
