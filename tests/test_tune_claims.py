"""The claims of a shared study: which worker measures which point.

The same rules hold for a study kept in a database (SQLite here; PostgreSQL
in test_tune_services) and for one kept in memory by a single process."""

from __future__ import annotations

import time

import pytest

from iopilot.tune.claims import DONE, FULL, HELD, RUNNING, TAKEN, Claims, LocalClaims, claims_for

pytest.importorskip("sqlalchemy")

ME, OTHER = "here:1", "there:2"


@pytest.fixture(params=["sqlite", "memory"])
def claims(request, tmp_path):
    if request.param == "memory":
        yield LocalClaims()
        return
    c = Claims(f"sqlite:///{tmp_path / 'claims.db'}", "s#1", beat=3600.0)
    yield c
    for stop in c.beating.values():
        stop.set()


def _by_key(claims) -> dict[str, object]:
    return {c.key: c for c in claims.all()}


def test_a_point_goes_to_the_first_worker_that_claims_it(claims):
    assert claims.take("a", {"x": 1}, ME) == TAKEN
    assert claims.take("a", {"x": 1}, OTHER) == HELD
    assert claims.take("a", {"x": 1}, ME) == HELD  # not twice, even to its owner
    (only,) = claims.all()
    assert (only.key, only.point, only.owner, only.state) == ("a", {"x": 1}, ME, RUNNING)


def test_the_budget_counts_every_claim_of_the_study(claims):
    """A budget of 2: the third point is refused (FULL), but a point already
    claimed is HELD, whatever the budget."""
    assert claims.take("a", {"x": 1}, ME, budget=2) == TAKEN
    assert claims.take("b", {"x": 2}, OTHER, budget=2) == TAKEN
    assert claims.take("c", {"x": 3}, ME, budget=2) == FULL
    assert claims.take("a", {"x": 1}, OTHER, budget=2) == HELD
    assert claims.take("c", {"x": 3}, ME, budget=3) == TAKEN
    claims.finish("a", ME)  # a measured point still counts
    assert claims.take("d", {"x": 4}, ME, budget=3) == FULL
    assert sorted(_by_key(claims)) == ["a", "b", "c"]


def test_only_the_owner_finishes_or_gives_back_a_claim(claims):
    claims.take("a", {"x": 1}, ME)
    claims.take("b", {"x": 2}, ME)
    claims.finish("a", OTHER)
    claims.release("b", OTHER)
    assert {k: (c.owner, c.state) for k, c in _by_key(claims).items()} == \
        {"a": (ME, RUNNING), "b": (ME, RUNNING)}  # fmt: skip
    claims.finish("a", ME)
    claims.release("b", ME)
    assert {k: c.state for k, c in _by_key(claims).items()} == {"a": DONE}
    claims.release("a", ME)  # a measured point is not given back
    assert {k: c.state for k, c in _by_key(claims).items()} == {"a": DONE}
    assert claims.take("b", {"x": 2}, OTHER) == TAKEN  # given back: free again
    assert claims.take("a", {"x": 1}, OTHER) == HELD


def test_a_claim_is_taken_over_or_dropped_only_as_it_was_read(claims):
    """The takeover of a dead worker's claim, and dropping it, succeed only
    while the claim is as it was read and still running."""
    claims.take("a", {"x": 1}, OTHER)
    seen = _by_key(claims)["a"]
    assert claims.take("a", {"x": 1}, ME, replacing=seen) == TAKEN
    assert _by_key(claims)["a"].owner == ME
    assert claims.take("a", {"x": 1}, OTHER, replacing=seen) == HELD  # read before the takeover
    assert claims.drop(seen) is False
    assert _by_key(claims)["a"].owner == ME

    now = _by_key(claims)["a"]
    claims.finish("a", ME)
    assert claims.drop(now) is False  # measured since it was read
    assert claims.take("a", {"x": 1}, OTHER, replacing=_by_key(claims)["a"]) == HELD

    claims.take("b", {"x": 2}, OTHER)
    assert claims.drop(_by_key(claims)["b"]) is True
    assert sorted(_by_key(claims)) == ["a"]
    assert claims.take("b", {"x": 2}, ME, budget=2) == TAKEN  # its room is free again


def test_a_claim_in_a_database_says_when_its_worker_last_beat(tmp_path):
    """The beat is the database's clock in seconds since 1970, and the age
    the seconds since it, as read."""
    claims = Claims(f"sqlite:///{tmp_path / 'claims.db'}", "s#1", beat=3600.0)
    before = time.time()
    claims.take("a", {"x": 1}, ME)
    after = time.time()
    (c,) = claims.all()
    assert before - 1.0 <= c.beat <= after + 1.0
    assert 0.0 <= c.age < 5.0
    t = claims.table
    with claims.engine.begin() as conn:
        conn.execute(t.update().values(beat=t.c.beat - 100.0))
    (c,) = claims.all()
    assert 99.0 <= c.age < 105.0 and before - 101.0 <= c.beat <= after - 99.0
    # Its worker beats again after the claim was read: the claim is not dropped or taken over.
    with claims.engine.begin() as conn:
        conn.execute(t.update().values(beat=t.c.beat + 1.0))
    assert claims.drop(c) is False
    assert claims.take("a", {"x": 1}, OTHER, replacing=c) == HELD
    assert [x.owner for x in claims.all()] == [ME]
    claims.finish("a", ME)


def test_studies_in_one_database_keep_their_claims_apart(tmp_path):
    url = f"sqlite:///{tmp_path / 'claims.db'}"
    one, two = Claims(url, "s#1", beat=3600.0), Claims(url, "s#2", beat=3600.0)
    assert one.take("a", {"x": 1}, ME, budget=1) == TAKEN
    assert two.take("a", {"x": 1}, OTHER, budget=1) == TAKEN  # same point, other study
    assert [c.owner for c in one.all()] == [ME] and [c.owner for c in two.all()] == [OTHER]
    assert one.lock_key != two.lock_key
    one.finish("a", ME)
    two.finish("a", OTHER)


def test_a_database_url_keeps_claims_in_the_database_and_anything_else_in_memory(tmp_path):
    url = f"sqlite:///{tmp_path / 'claims.db'}"
    assert isinstance(claims_for(url, "s#1"), Claims)
    assert isinstance(claims_for(str(tmp_path / "journal.log"), "s#1"), LocalClaims)
    assert isinstance(claims_for(None, "s#1"), LocalClaims)
