"""Which worker of a study measures which point.

A claim is a row of ``iopilot_claims`` in the study's own database, keyed by
(study, point): two workers that choose the same point at the same moment
both insert it, the key lets one insert through, and the other chooses again.
The database decides, not a read followed by a write, so a worker whose
reads are late cannot take a point another one holds.  The study's budget
(``--trials``) is part of the same insert: it goes in only while the study
has fewer claims than the budget, counted under a lock of the study's own
(PostgreSQL reads committed rows at each statement: two inserts that each
counted the rows before the other's went in would both go in), so workers
that claim at the same moment never make one trial more than the budget.

A row stays once its point is measured (state ``done``): a worker whose view
of the study's trials is behind cannot claim that point again.  A worker that
is stopped while measuring gives its claim back.  The worker measuring a
point says every BEAT seconds that it is alive (the claim's ``beat``, the
database's clock, so the hosts' clocks need not agree); the claim of one
that died, a process of this host that is gone or a claim whose beat is
older than STALE seconds (another host's worker, which cannot be asked), is
taken over in one conditional update, by one worker only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from typing import Any

from .._record import record

TABLE = "iopilot_claims"
RUNNING, DONE = "running", "done"
TAKEN, HELD, FULL = "taken", "held", "full"  # what a claim got: the point, nothing, no room
BEAT = 5.0  # seconds between a measuring worker's signs of life
STALE = 6 * BEAT  # a claim not renewed for this long is a dead worker's


@record(frozen=True)
class Claim:
    key: str  # the point's key
    point: dict[str, Any]
    owner: str  # "host:pid"
    state: str  # RUNNING or DONE
    beat: float = 0.0  # when its owner last said it was alive (the database's clock)
    age: float = 0.0  # seconds since then, when it was read


class Claims:
    """The claims of one study in a SQL database (SQLAlchemy URL)."""

    def __init__(self, url: str, study: str, tries: int = 5, beat: float = BEAT,
                 stale: float = STALE) -> None:  # fmt: skip
        import sqlalchemy as sa  # lazy: optuna imports it anyway, tune/ is loaded by `--help`

        self.sa = sa
        self.study = study
        self.period, self.stale = beat, stale
        self.beating: dict[str, threading.Event] = {}  # key -> set to stop its heartbeat
        # A connection for each use, none kept between them: forty workers
        # would otherwise hold one here each besides Optuna's.
        pool = {} if url.startswith("sqlite") else {"poolclass": sa.pool.NullPool}
        self.engine = sa.create_engine(url, **pool)
        # One lock per study (PostgreSQL's advisory locks take a 64-bit key).
        self.lock_key = int.from_bytes(hashlib.sha256(f"{TABLE}/{study}".encode()).digest()[:8],
                                       "big", signed=True)  # fmt: skip
        meta = sa.MetaData()
        self.table = sa.Table(
            TABLE, meta,
            sa.Column("study", sa.String(512), primary_key=True),
            sa.Column("point_key", sa.Text, primary_key=True),
            sa.Column("point", sa.Text, nullable=False),
            sa.Column("owner", sa.String(512), nullable=False),
            sa.Column("state", sa.String(16), nullable=False),
            sa.Column("beat", sa.Float(precision=53), nullable=False),
        )  # fmt: skip
        for attempt in range(tries):
            try:
                meta.create_all(self.engine, checkfirst=True)
                break
            except sa.exc.DBAPIError:
                # Workers started together race to create the table: the
                # loser's error is that the other made it.
                if attempt == tries - 1:
                    raise
                time.sleep(0.1 * (attempt + 1))

    def _now(self) -> Any:
        """The database's clock, in seconds since 1970."""
        sa, name = self.sa, self.engine.dialect.name
        if name == "postgresql":
            return sa.cast(sa.extract("epoch", sa.func.clock_timestamp()), sa.Float(53))
        if name == "sqlite":
            return (sa.func.julianday("now") - 2440587.5) * 86400.0
        return sa.literal(time.time())

    def _insert(self, key: str, point: dict[str, Any], owner: str, budget: int | None) -> Any:
        """The claim's row, inserted in one statement: only while the key is
        free and the study has fewer than ``budget`` claims."""
        sa, t = self.sa, self.table
        row = sa.select(sa.literal(self.study), sa.literal(key), sa.literal(json.dumps(point)),
                        sa.literal(owner), sa.literal(RUNNING), self._now())  # fmt: skip
        if budget is not None:
            count = sa.select(sa.func.count()).select_from(t).where(t.c.study == self.study)
            row = row.where(count.scalar_subquery() < budget)
        else:
            row = row.where(sa.true())  # SQLite: INSERT ... SELECT ... ON CONFLICT needs a WHERE
        name = self.engine.dialect.name
        if name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        elif name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        else:
            return t.insert().from_select(list(t.c), row)
        # RETURNING says whether the row went in (psycopg's rowcount is -1 here).
        return insert(t).from_select(list(t.c), row).on_conflict_do_nothing() \
            .returning(t.c.owner)  # fmt: skip

    def take(self, key: str, point: dict[str, Any], owner: str,
             replacing: Claim | None = None, budget: int | None = None) -> str:  # fmt: skip
        """Claim the point for ``owner``: TAKEN, HELD (another worker holds
        it) or FULL (the study has ``budget`` claims already).  ``replacing``:
        a running claim to take over (its worker is gone), as it was read; the
        takeover fails if that worker said it was alive since."""
        sa, t = self.sa, self.table
        with self.engine.begin() as conn:
            if replacing is not None:
                done = conn.execute(t.update().where(
                    t.c.study == self.study, t.c.point_key == key, t.c.owner == replacing.owner,
                    t.c.beat == replacing.beat, t.c.state == RUNNING,
                ).values(owner=owner, beat=self._now()))  # fmt: skip
                got = TAKEN if done.rowcount == 1 else HELD
            else:
                if self.engine.dialect.name == "postgresql":
                    # Until this transaction ends no other claim of the study
                    # is made: the count below holds when the row goes in.
                    # (SQLite writes one statement at a time anyway.)
                    conn.execute(sa.select(sa.func.pg_advisory_xact_lock(self.lock_key)))
                try:
                    done = conn.execute(self._insert(key, point, owner, budget))
                    went = done.first() is not None if done.returns_rows else done.rowcount == 1
                except sa.exc.IntegrityError:  # a database without ON CONFLICT
                    went = False
                if went:
                    got = TAKEN
                else:
                    there = conn.execute(sa.select(t.c.owner).where(
                        t.c.study == self.study, t.c.point_key == key)).first()  # fmt: skip
                    got = HELD if there is not None else FULL
        if got == TAKEN:
            self._keep_alive(key, owner)
        return got

    def _keep_alive(self, key: str, owner: str) -> None:
        """Renew the claim's beat every ``period`` seconds until it is
        finished or released (a thread: the measuring waits on a child)."""
        self._stop_beating(key)
        stop = self.beating[key] = threading.Event()
        t = self.table

        def beat() -> None:
            while not stop.wait(self.period):
                with contextlib.suppress(Exception), self.engine.begin() as conn:
                    # a beat missed (the database busy a moment) is made up by the next
                    conn.execute(t.update().where(
                        t.c.study == self.study, t.c.point_key == key, t.c.owner == owner,
                        t.c.state == RUNNING).values(beat=self._now()))  # fmt: skip

        threading.Thread(target=beat, name=f"claim-beat-{key[:16]}", daemon=True).start()

    def _stop_beating(self, key: str) -> None:
        stop = self.beating.pop(key, None)
        if stop is not None:
            stop.set()

    def finish(self, key: str, owner: str) -> None:
        """The point is measured: nobody claims it again."""
        self._stop_beating(key)
        t = self.table
        with self.engine.begin() as conn:
            conn.execute(t.update().where(t.c.study == self.study, t.c.point_key == key,
                                          t.c.owner == owner).values(state=DONE))  # fmt: skip

    def release(self, key: str, owner: str) -> None:
        """Give a claim back unmeasured (the worker was stopped, or the run could not start)."""
        self._stop_beating(key)
        t = self.table
        with self.engine.begin() as conn:
            conn.execute(t.delete().where(t.c.study == self.study, t.c.point_key == key,
                                          t.c.owner == owner, t.c.state == RUNNING))  # fmt: skip

    def drop(self, claim: Claim) -> bool:
        """Delete a running claim of a worker that is gone, as it was read
        (not if its worker said it was alive since): its point is free again
        and no longer counts toward the budget."""
        t = self.table
        with self.engine.begin() as conn:
            done = conn.execute(t.delete().where(
                t.c.study == self.study, t.c.point_key == claim.key, t.c.owner == claim.owner,
                t.c.beat == claim.beat, t.c.state == RUNNING))  # fmt: skip
        return done.rowcount == 1

    def all(self) -> list[Claim]:
        t = self.table
        with self.engine.connect() as conn:
            rows = conn.execute(self.sa.select(t.c.point_key, t.c.point, t.c.owner, t.c.state,
                                               t.c.beat, self._now() - t.c.beat)
                                .where(t.c.study == self.study)).all()  # fmt: skip
        return [Claim(k, json.loads(p), o, s, b, a) for k, p, o, s, b, a in rows]


class LocalClaims:
    """The claims of a study only this process sees (a storage object, in memory)."""

    stale = STALE

    def __init__(self) -> None:
        self.rows: dict[str, Claim] = {}

    def take(self, key: str, point: dict[str, Any], owner: str,
             replacing: Claim | None = None, budget: int | None = None) -> str:  # fmt: skip
        old = self.rows.get(key)
        if old is not None and (replacing is None or old != replacing or old.state != RUNNING):
            return HELD
        if old is None and budget is not None and len(self.rows) >= budget:
            return FULL
        self.rows[key] = Claim(key, point, owner, RUNNING)
        return TAKEN

    def finish(self, key: str, owner: str) -> None:
        old = self.rows.get(key)
        if old is not None and old.owner == owner:
            self.rows[key] = Claim(key, old.point, owner, DONE)

    def release(self, key: str, owner: str) -> None:
        old = self.rows.get(key)
        if old is not None and old.owner == owner and old.state == RUNNING:
            del self.rows[key]

    def drop(self, claim: Claim) -> bool:
        if self.rows.get(claim.key) != claim or claim.state != RUNNING:
            return False
        del self.rows[claim.key]
        return True

    def all(self) -> list[Claim]:
        return list(self.rows.values())


def claims_for(storage: Any, study: str) -> Claims | LocalClaims:
    """The claims of ``study`` kept beside its Optuna storage."""
    if isinstance(storage, str) and "://" in storage:
        return Claims(storage, study)
    return LocalClaims()
