"""Which worker of a study measures which point.

A claim is a row of ``iopilot_claims`` in the study's own database, keyed by
(study, point): two workers that choose the same point at the same moment
both insert it, the key lets one insert through, and the other chooses again.
The database decides, not a read followed by a write, so a worker whose
reads are late cannot take a point another one holds.

A row stays once its point is measured (state ``done``): a worker whose view
of the study's trials is behind cannot claim that point again.  A worker that
is stopped while measuring gives its claim back; the claim of one that died
(a process of this host that is gone) is taken over in one conditional
update, by one worker only.
"""

from __future__ import annotations

import json
import time
from typing import Any

from .._record import record

TABLE = "iopilot_claims"
RUNNING, DONE = "running", "done"


@record(frozen=True)
class Claim:
    key: str  # the point's key
    point: dict[str, Any]
    owner: str  # "host:pid"
    state: str  # RUNNING or DONE


class Claims:
    """The claims of one study in a SQL database (SQLAlchemy URL)."""

    def __init__(self, url: str, study: str, tries: int = 5) -> None:
        import sqlalchemy as sa  # lazy: optuna imports it anyway, tune/ is loaded by `--help`

        self.sa = sa
        self.study = study
        # A connection for each use, none kept between them: forty workers
        # would otherwise hold one here each besides Optuna's.
        pool = {} if url.startswith("sqlite") else {"poolclass": sa.pool.NullPool}
        self.engine = sa.create_engine(url, **pool)
        meta = sa.MetaData()
        self.table = sa.Table(
            TABLE, meta,
            sa.Column("study", sa.String(512), primary_key=True),
            sa.Column("point_key", sa.Text, primary_key=True),
            sa.Column("point", sa.Text, nullable=False),
            sa.Column("owner", sa.String(512), nullable=False),
            sa.Column("state", sa.String(16), nullable=False),
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

    def _insert(self, row: dict[str, Any]) -> Any:
        name = self.engine.dialect.name
        if name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        elif name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        else:
            return self.table.insert().values(**row)
        # RETURNING says whether the row went in (psycopg's rowcount is -1 here).
        return insert(self.table).values(**row).on_conflict_do_nothing() \
            .returning(self.table.c.owner)

    def take(self, key: str, point: dict[str, Any], owner: str,
             replacing: str | None = None) -> bool:  # fmt: skip
        """Claim the point for ``owner``; whether it got it.  ``replacing``:
        the owner of a running claim to take over (a worker that is gone)."""
        t = self.table
        with self.engine.begin() as conn:
            if replacing is not None:
                done = conn.execute(t.update().where(
                    t.c.study == self.study, t.c.point_key == key, t.c.owner == replacing,
                    t.c.state == RUNNING).values(owner=owner))  # fmt: skip
                return done.rowcount == 1
            row = {"study": self.study, "point_key": key, "point": json.dumps(point),
                   "owner": owner, "state": RUNNING}  # fmt: skip
            try:
                done = conn.execute(self._insert(row))
                return done.first() is not None if done.returns_rows else done.rowcount == 1
            except self.sa.exc.IntegrityError:  # a database without ON CONFLICT
                return False

    def finish(self, key: str, owner: str) -> None:
        """The point is measured: nobody claims it again."""
        t = self.table
        with self.engine.begin() as conn:
            conn.execute(t.update().where(t.c.study == self.study, t.c.point_key == key,
                                          t.c.owner == owner).values(state=DONE))  # fmt: skip

    def release(self, key: str, owner: str) -> None:
        """Give a claim back unmeasured (the worker was stopped, or the run could not start)."""
        t = self.table
        with self.engine.begin() as conn:
            conn.execute(t.delete().where(t.c.study == self.study, t.c.point_key == key,
                                          t.c.owner == owner, t.c.state == RUNNING))  # fmt: skip

    def all(self) -> list[Claim]:
        t = self.table
        with self.engine.connect() as conn:
            rows = conn.execute(self.sa.select(t.c.point_key, t.c.point, t.c.owner, t.c.state)
                                .where(t.c.study == self.study)).all()  # fmt: skip
        return [Claim(k, json.loads(p), o, s) for k, p, o, s in rows]


class LocalClaims:
    """The claims of a study only this process sees (a storage object, in memory)."""

    def __init__(self) -> None:
        self.rows: dict[str, Claim] = {}

    def take(self, key: str, point: dict[str, Any], owner: str,
             replacing: str | None = None) -> bool:  # fmt: skip
        old = self.rows.get(key)
        if old is not None and (replacing is None or old.owner != replacing
                                or old.state != RUNNING):  # fmt: skip
            return False
        self.rows[key] = Claim(key, point, owner, RUNNING)
        return True

    def finish(self, key: str, owner: str) -> None:
        old = self.rows.get(key)
        if old is not None and old.owner == owner:
            self.rows[key] = Claim(key, old.point, owner, DONE)

    def release(self, key: str, owner: str) -> None:
        old = self.rows.get(key)
        if old is not None and old.owner == owner and old.state == RUNNING:
            del self.rows[key]

    def all(self) -> list[Claim]:
        return list(self.rows.values())


def claims_for(storage: Any, study: str) -> Claims | LocalClaims:
    """The claims of ``study`` kept beside its Optuna storage."""
    if isinstance(storage, str) and "://" in storage:
        return Claims(storage, study)
    return LocalClaims()
