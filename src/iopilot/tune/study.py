"""A tuning study: measure the default, then the points a strategy proposes,
with repeats where the noise could hide the difference, kept in an Optuna
storage so a stopped study carries on where it was.

The noise is the relative spread (max - min) / median of the default's runs.
A candidate whose first run comes within the noise of the best so far (or
beats it) is run again until it has as many runs as the default; trials are
compared by their median.  The best is a win only when fresh runs of it and
of the default, interleaved, pass a rank test (``verdict``); otherwise the
default stays the advice.  A study also keeps the features of its job and
what won, and starts from the winners of similar jobs' studies (``warm``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import random
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._record import field, record
from ..errors import InputError
from . import search
from .claims import FULL, RUNNING, TAKEN, Claim, claims_for
from .generate import rank
from .launch import RunTrial
from .objective import OBJECTIVES, Run, measure
from .search import WARM, Context, Proposal, Record
from .space import Space, point_key
from .warm import JOB, RESULT, Warm, job_of, learnt

ATTR = "iopilot"  # the user attribute holding a trial's record


@record
class Options:
    command: list[str]
    objective: str = "io"
    strategy: str = "guided"
    trials: int = 20
    repeats: int = 3
    seed: int = 0
    timeout: float | None = None
    verify: str | None = None
    storage: str = ""
    work: Path = Path(".")
    study_name: str = ""
    # the storage whose similar studies' winners go first ("": the study's own; None: none)
    warm_from: str | None = ""


@record
class Outcome:
    """What a study found."""

    space: Space
    records: list[Record]
    default: Record
    best: Record  # the advice: the default unless something beat it in every run
    candidate: Record  # the best median, win or not
    verdict: str
    noise: float
    timeout: float | None
    stopped: str
    study_name: str
    findings: list[dict[str, Any]] = field(default_factory=list)
    # the runs that decided the verdict: default and best again, interleaved
    confirm_default: list[float] = field(default_factory=list)
    confirm_best: list[float] = field(default_factory=list)
    p_value: float | None = None
    warm: list[Warm] = field(default_factory=list)  # winners of similar jobs, tried first


# A win is a difference that would be seen again: the default and the best
# are run again, interleaved (the machine's slow moments hit both alike), and
# a one-sided rank test over those fresh runs must put the chance of the
# difference being noise at ALPHA or below.  Fresh runs, because the best was
# chosen for its good runs among many (the search's runs of it are biased).
ALPHA = 0.01
CONFIRM = 5  # runs each; 5 against 5 separated completely: p = 1/252


def rank_test(default_runs: list[float], best_runs: list[float], maximize: bool) -> float:
    """One-sided exact Mann-Whitney p: the chance, were the two the same, that
    the best's runs would beat the default's as often as they did (ties
    count half).  Exact by enumerating the labellings of the pooled runs."""
    import itertools

    pooled = [*default_runs, *best_runs]
    nb = len(best_runs)

    def u(best_idx: tuple[int, ...]) -> float:
        chosen = set(best_idx)
        bs = [pooled[i] for i in best_idx]
        ds = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        return sum((b > d if maximize else b < d) + 0.5 * (b == d) for b in bs for d in ds)

    seen = u(tuple(range(len(default_runs), len(pooled))))
    labellings = list(itertools.combinations(range(len(pooled)), nb))
    return sum(u(c) >= seen - 1e-9 for c in labellings) / len(labellings)


def verdict(default_runs: list[float], best_runs: list[float], maximize: bool) -> str:
    """``win`` when the rank test over the runs says so at ALPHA,
    ``within noise`` when it does not, ``noise unknown`` below two runs each."""
    if len(default_runs) < 2 or len(best_runs) < 2:
        return "noise unknown"
    return "win" if rank_test(default_runs, best_runs, maximize) <= ALPHA else "within noise"


def noise_of(runs: list[float]) -> float:
    """Relative spread of a point's runs (0 with fewer than two)."""
    if len(runs) < 2:
        return 0.0
    med = statistics.median(runs)
    return (max(runs) - min(runs)) / med if med > 0 else 0.0


class Study:
    """One study, bound to its Optuna storage."""

    def __init__(self, opts: Options, space_for: Callable[[dict[str, Any]], Space],
                 launch: RunTrial,
                 progress: Callable[[Record, Record | None, int], None] | None = None,
                 say: Callable[[str], None] | None = None) -> None:
        import optuna  # lazy: 0.4 s to import; tune/ is loaded by `bench` and `--help` too

        search._quiet_optuna()
        self.opts = opts
        self.space_for = space_for
        self.launch = launch
        self.progress = progress or (lambda rec, best, n: None)
        self.say = say or (lambda text: None)
        self.unit, direction = OBJECTIVES[opts.objective]
        self.maximize = direction == "maximize"
        try:
            self.study = _open_study(optuna, opts.storage, opts.study_name, direction)
        except (ImportError, ModuleNotFoundError) as e:
            raise InputError("--study", f"cannot open {opts.storage}: {e}") from None
        except Exception as e:  # SQLAlchemy's errors: a wrong URL, a server that does not answer
            raise InputError("--study", f"cannot open {opts.storage}: "
                             f"{type(e).__name__}: {str(e).splitlines()[0]}") from None
        # Which worker measures which point, beside the study in its database
        # (keyed by the study's id too: a study deleted and made again starts afresh).
        self.claims = claims_for(storage_url(opts.storage),
                                 f"{opts.study_name}#{getattr(self.study, '_study_id', '')}")
        self.work = opts.work
        self.work.mkdir(parents=True, exist_ok=True)
        self._clear_leftovers()

    # -- values and costs
    def loss(self, value: float) -> float:
        """A value as a cost, lower better (bandwidth becomes seconds per MiB)."""
        if self.maximize:
            return 1.0 / value if value > 0 else math.inf
        return value

    def _clear_leftovers(self) -> None:
        """Run directories of a study process that was killed, and its unfinished trials."""
        import optuna  # lazy: 0.4 s to import; tune/ is loaded by `bench` and `--help` too

        for d in self.work.glob("t*-p*-r*"):
            pid = d.name.split("-p")[1].split("-")[0]
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(d, ignore_errors=True)
        # Unfinished trials of a process of this host that is gone; a shared
        # study's other workers (other hosts, or alive here) keep theirs.
        host = search.owner().rsplit(":", 1)[0]
        for t in self.study.get_trials(deepcopy=False,
                                       states=(optuna.trial.TrialState.RUNNING,)):  # fmt: skip
            who, _, pid = str(t.user_attrs.get(search.OWNER, "")).rpartition(":")
            if who != host or not pid.isdigit() or _alive(int(pid)):
                continue
            with contextlib.suppress(Exception):
                self.study.tell(t.number, state=optuna.trial.TrialState.FAIL,
                                skip_if_finished=True)  # fmt: skip

    # -- the history
    def history(self) -> list[Record]:
        out = []
        for t in self.study.get_trials(deepcopy=False):
            d = t.user_attrs.get(ATTR)
            if d is None:
                continue
            runs = [float(x) for x in d["runs"]]
            ok = d["status"] == "ok"
            loss = self.loss(statistics.median(runs)) if ok and runs else math.inf
            out.append(Record(t.number, d["point"], runs, loss, d["status"], d.get("reason", ""),
                              d.get("phase", ""), d.get("walls", []), d.get("extra", {})))
        return out

    def _store(self, rec: Record, proposal: Proposal | None) -> Record:
        return store(self.study, self.space, rec, proposal)

    # -- measuring
    def _run_dir(self, n: int | str, k: int) -> Path:
        """A run's directory: trial ``n`` (a number, or a name such as
        ``confirm-best2``), this process, run ``k``."""
        name = f"{n:04d}" if isinstance(n, int) else f"-{n}"
        return self.work / f"t{name}-p{os.getpid()}-r{k}"

    def _measure_point(self, point: dict[str, Any], n: int | str, runs: int, timeout: float | None,
                       keep_findings: bool = False,
                       more: Callable[[list[float]], bool] | None = None) -> tuple[list[Run], str]:
        """Run a point ``runs`` times (or once, then again while ``more`` says so)."""
        doc = self.space.settings_doc(point) if point else {}
        out: list[Run] = []
        while True:
            k = len(out)
            r = measure(self.opts.command, doc, self.opts.objective, self._run_dir(n, k),
                        launch=self.launch, timeout=timeout, verify=self.opts.verify,
                        keep_findings=keep_findings and k == 0)  # fmt: skip
            out.append(r)
            if not r.ok:
                reason = r.reason if k == 0 else f"run {k + 1}: {r.reason}"
                return out, reason
            values = [x.value for x in out if x.value is not None]
            if len(out) >= runs or (more is not None and not more(values)):
                return out, ""

    def run(self) -> Outcome:
        o = self.opts
        if o.trials < 1 or o.repeats < 1:
            raise InputError("--trials/--repeats", "must be 1 or more")
        default = self._default_measured_elsewhere()
        if default is None:
            try:
                runs, reason = self._measure_point({}, 0, o.repeats, o.timeout,
                                                   keep_findings=True)  # fmt: skip
            except BaseException:
                self._release({})
                raise
            first = runs[0]
            if reason:
                self._release({})
                raise InputError(" ".join(o.command), f"the default run failed: {reason}",
                                 "fix the command before tuning it")  # fmt: skip
            default = Record(0, {}, [r.value for r in runs if r.value is not None], 0.0, "ok",
                             phase="default", walls=[r.seconds for r in runs],
                             extra=observed(first))  # fmt: skip
            default.loss = self.loss(statistics.median(default.runs))
            self.space = self.space_for(default.extra)
            self._store(default, None)
            self.study.set_user_attr(JOB, job_of(o.command, default.extra))
            self._finish({})
            history = [default]
            self.progress(default, default, 1)
        findings = default.extra.get("findings", [])
        self.space = self.space_for(default.extra)
        noise = noise_of([self.loss(v) for v in default.runs])
        timeout = o.timeout if o.timeout is not None else max(10.0, 5 * max(default.walls or [1]))
        strategy = search.make(o.strategy)
        ranking = rank(self.space, findings)
        warm = self._learnt(default)
        stopped = ""
        while True:
            # Other workers of a shared study: what they measured, and what they
            # are measuring now (as records without runs), so nobody repeats it.
            history = self.history()
            taken = history + self._claimed({r.key for r in history})
            if len(taken) >= o.trials:
                break
            best = min((r for r in history if r.ok and len(r.runs) >= o.repeats),
                       key=lambda r: r.loss, default=default)  # fmt: skip
            ctx = Context(self.space, taken, o.seed, o.trials, noise, self.study, ranking,
                          self.loss, o.repeats)  # fmt: skip
            known = {r.key for r in taken}
            proposal = next((Proposal(w.point, WARM) for w in warm
                             if point_key(w.point) not in known), None) or strategy.next(ctx)
            if proposal is None:
                stopped = strategy.stopped
                break
            if point_key(proposal.point) in {r.key for r in taken}:  # a strategy's slip
                raise AssertionError(f"{o.strategy} proposed a measured point")
            got = self._take(proposal.point, budget=o.trials)
            if got != TAKEN:
                # Another worker chose the same point at the same moment and
                # measures it (or measured it, and this one's reads are behind):
                # this one chooses again.  Or the others' claims used the budget.
                if proposal.trial is not None:
                    proposal.trial.set_user_attr("claimed_elsewhere", True)
                    self.study.tell(proposal.trial, state=optuna_state("FAIL"))
                if got == FULL:
                    break
                continue

            def promising(values: list[float], best_loss: float = best.loss) -> bool:
                # Only a candidate that may be the best earns the extra runs.
                return self.loss(statistics.median(values)) <= best_loss * (1 + noise)

            n = len(history)
            try:
                runs, reason = self._measure_point(proposal.point, n, o.repeats, timeout,
                                                   more=promising)  # fmt: skip
            except BaseException:
                self._release(proposal.point)
                raise
            values = [r.value for r in runs if r.value is not None]
            rec = Record(n, proposal.point, values,
                         self.loss(statistics.median(values)) if values and not reason
                         else math.inf, "failed" if reason else "ok", reason, proposal.phase,
                         [r.seconds for r in runs], proposal.extra)  # fmt: skip
            rec = self._store(rec, proposal)
            self._finish(proposal.point)
            history.append(rec)
            now = min((r for r in history if r.ok and len(r.runs) >= o.repeats),
                      key=lambda r: r.loss, default=default)  # fmt: skip
            self.progress(rec, now, len(history))
        history = self.history()
        confirm = self._confirm(history, default, timeout)
        out = self._outcome(history, default, noise, timeout, stopped, findings, confirm)
        out.warm = warm
        self._remember(out)
        return out

    # -- what was learnt
    def _learnt(self, default: Record) -> list[Warm]:
        """Winners of similar jobs' studies, to be measured first; said aloud."""
        src = self.opts.warm_from
        if src is None:
            return []
        job = self.study.user_attrs.get(JOB) or job_of(self.opts.command, default.extra)
        warm = learnt(storage_url(src or self.opts.storage), self.opts.study_name, job,
                      self.space)  # fmt: skip
        for w in warm:
            gain = f", {w.speedup:.2f}x there" if w.speedup else ""
            self.say(f"starting from settings that won a similar tuning ({w.why}{gain}): "
                     f"{', '.join(f'{k}={v}' for k, v in w.point.items())}")  # fmt: skip
        return warm

    def _remember(self, out: Outcome) -> None:
        """Keep the conclusion with the study: a later tuning of a similar job starts from it."""
        speedup = None
        if out.confirm_default and out.confirm_best:
            b = self.loss(statistics.median(out.confirm_best))
            speedup = self.loss(statistics.median(out.confirm_default)) / b if b > 0 else None
        self.study.set_user_attr(RESULT, {"verdict": out.verdict, "point": out.best.point,
                                          "speedup": speedup})  # fmt: skip

    def _candidate(self, history: list[Record], default: Record) -> Record:
        confirmed = [r for r in history if r.ok and len(r.runs) >= self.opts.repeats]
        best = min(confirmed, key=lambda r: r.loss, default=default)
        # The history is read again from the study: its record of the default
        # is another object, and the default must not be confirmed against itself.
        return default if best.key == default.key else best

    def _confirm(self, history: list[Record], default: Record,
                 timeout: float | None) -> tuple[list[float], list[float]] | None:  # fmt: skip
        """The default and the best candidate run CONFIRM times each again,
        interleaved; None when there is no candidate or one run per point
        was asked (--repeats 1: no noise to judge by)."""
        cand = self._candidate(history, default)
        if cand is default or self.opts.repeats < 2:
            return None
        runs: dict[str, list[float]] = {"default": [], "best": []}
        for k in range(CONFIRM):
            order = (("default", {}), ("best", cand.point))
            for name, point in order if k % 2 == 0 else order[::-1]:
                out, reason = self._measure_point(point, f"confirm-{name}{k}", 1,
                                                  timeout)  # fmt: skip
                if reason or out[0].value is None:
                    return None
                runs[name].append(out[0].value)
        return runs["default"], runs["best"]

    # -- points being measured (a shared study's workers)
    def _default_measured_elsewhere(self, poll: float = 0.2) -> Record | None:
        """The default's record, measured by another worker; None once this
        worker holds the claim on it (and measures it).  A worker that joins
        while another measures the default waits for that measurement instead
        of repeating it, as long as that worker is alive (on another machine:
        as long as it says so); then it takes the claim over."""
        while True:
            default = next((r for r in self.history() if r.phase == "default"), None)
            if default is not None:
                return default
            holder = next((c for c in self.claims.all() if c.key == point_key({})), None)
            if holder is not None and holder.state == RUNNING and holder.owner == search.owner():
                return None
            if holder is None or holder.state != RUNNING or self._gone(holder):
                if self._take({}) == TAKEN:
                    return None
            time.sleep(poll)

    def _take(self, point: dict[str, Any], budget: int | None = None) -> str:
        """Claim ``point`` for this worker: one worker of the study gets it
        (TAKEN), while the study has fewer than ``budget`` claims (else FULL).
        The running claim of a worker that is gone is taken over."""
        key = point_key(point)
        old = next((c for c in self.claims.all() if c.key == key), None)
        replacing = old if old is not None and self._gone(old) else None
        got = self.claims.take(key, point, search.owner(), replacing, budget)
        if got == FULL:
            # The claims of workers that are gone count toward the budget
            # too: they are given up (their points are free again) and the
            # claim is tried once more (a study resumed after a worker was
            # killed mid-measurement would otherwise end one trial short).
            gone = [c for c in self.claims.all() if self._gone(c)]
            for c in gone:
                self.claims.drop(c)  # or another worker did
            if gone:
                got = self.claims.take(key, point, search.owner(), None, budget)
        return got

    def _finish(self, point: dict[str, Any]) -> None:
        self.claims.finish(point_key(point), search.owner())

    def _release(self, point: dict[str, Any]) -> None:
        with contextlib.suppress(Exception):  # already on the way out: the first error stands
            self.claims.release(point_key(point), search.owner())

    def _gone(self, claim: Claim) -> bool:
        """Whether the running ``claim``'s worker is gone: a process of this
        host that is not there, or a worker that has not said it was alive for
        the claims' stale limit (one of another host cannot be asked)."""
        if claim.state != RUNNING or claim.owner == search.owner():
            return False
        host = search.owner().rsplit(":", 1)[0]
        who, _, pid = claim.owner.rpartition(":")
        if who == host and pid.isdigit() and not _alive(int(pid)):
            return True
        return claim.age > self.claims.stale

    def _claimed(self, measured: set[str]) -> list[Record]:
        """Points other workers claimed that this worker has not seen measured
        (being measured, or measured after it last read the trials), as
        records without runs."""
        out = []
        for c in self.claims.all():
            if c.key in measured or self._gone(c):
                continue  # a worker that died mid-measurement: the point is free again
            out.append(Record(-1, c.point, [], math.inf, "running",
                              "being measured by another worker", "claimed"))  # fmt: skip
        return out

    def _outcome(self, history: list[Record], default: Record, noise: float,
                 timeout: float | None, stopped: str, findings: list[dict[str, Any]],
                 confirm: tuple[list[float], list[float]] | None = None) -> Outcome:  # fmt: skip
        cand = self._candidate(history, default)
        p = None
        if cand is default:
            v = "the default was best"
        elif confirm is not None:
            p = rank_test(confirm[0], confirm[1], self.maximize)
            v = verdict(confirm[0], confirm[1], self.maximize)
        else:  # one run per point: nothing to judge the noise by
            v = "noise unknown"
        best = cand if v in ("win", "noise unknown") else default
        d_runs, b_runs = confirm if confirm is not None else ([], [])
        return Outcome(self.space, history, default, best, cand, v, noise, timeout,
                       stopped or f"{self.opts.trials} trials done", self.opts.study_name,
                       findings, d_runs, b_runs, p)  # fmt: skip


def store(study: Any, space: Space, rec: Record, proposal: Proposal | None) -> Record:
    """Keep a measured trial in the Optuna study (told, when the model proposed
    it; added, otherwise), with its record as a user attribute."""
    import optuna  # lazy: 0.4 s to import; tune/ is loaded by `bench` and `--help` too

    attrs = {"point": rec.point, "runs": rec.runs, "status": rec.status,
             "reason": rec.reason, "phase": rec.phase, "walls": rec.walls,
             "extra": rec.extra}  # fmt: skip
    value = statistics.median(rec.runs) if rec.ok else None
    state = optuna.trial.TrialState.COMPLETE if rec.ok else optuna.trial.TrialState.FAIL
    if proposal is not None and proposal.trial is not None:
        proposal.trial.set_user_attr(ATTR, attrs)
        rec.number = study.tell(proposal.trial, value, state=state).number
        return rec
    params, dists = space.to_optuna(rec.point) if rec.point else ({}, {})
    study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=value,
                                              state=state, user_attrs={ATTR: attrs}))  # fmt: skip
    rec.number = study.get_trials(deepcopy=False)[-1].number
    return rec


def observed(run: Run) -> dict[str, Any]:
    """What the default's first run showed: its findings, the layers its I/O went
    through, the number of processes (a generated space and the ranking use them)."""
    layers = sorted(run.io.get("by_layer", {}).get("all_ranks", {}))
    return {"findings": run.findings, "layers": layers, "nprocs": run.io.get("nprocs", 1),
            "layer_summaries": run.io.get("layer_summaries", [])}  # fmt: skip


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def study_name(command: list[str], space_text: str, objective: str, strategy: str,
               seed: int) -> str:  # fmt: skip
    """A name that is the same when the same tuning is asked for again (to resume)."""
    key = json.dumps([command, space_text, objective, strategy, seed])
    return f"iopilot-tune-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def _open_study(optuna: Any, storage: str, name: str, direction: str, tries: int = 8) -> Any:
    """Create or load the study.  Workers that start together on an empty
    PostgreSQL database make its tables and the study one at a time (under a
    lock of the server's); elsewhere the loser of that race tries again, its
    error being only that the other one won, and loads what was made.

    A worker keeps one connection to a server between its reads (Optuna's
    engine keeps as many as it ever used at once, two while it makes its
    tables: forty workers, and the three a worker held with its claims' own,
    used up PostgreSQL's 100, and those that could not connect failed inside
    Optuna), and a server full for a moment is tried again.

    A study that is there already is loaded without the lock: opening it only
    reads then, so its workers need not wait in that line (the lock is the
    server's, one for all studies: each worker opening in some twenty round
    trips, twenty workers joining five made studies at once, reads late now
    and then, had the last open 19 s after the first; at once, within 3 s)."""
    storage = storage_url(storage)
    shared = isinstance(storage, str) and storage.startswith("postgresql")
    if shared:
        made = _made_already(optuna, storage, name)
        if made is not None:
            return made
    for attempt in range(tries):
        try:
            with _one_at_a_time(storage if shared else None):
                rdb = optuna.storages.RDBStorage(
                    storage, engine_kwargs={"pool_size": 1, "max_overflow": 4}) \
                    if shared else storage  # fmt: skip
                return optuna.create_study(storage=rdb, study_name=name, direction=direction,
                                           load_if_exists=True)  # fmt: skip
        except Exception as e:
            # Optuna's StorageInternalError names its cause in the chain only.
            text, cause = "", e
            while cause is not None:
                text += f" {type(cause).__name__} {cause}"
                cause = cause.__cause__ or cause.__context__
            raced = any(w in text for w in ("IntegrityError", "UniqueViolation", "DuplicateTable",
                                            "already exists", "too many clients"))  # fmt: skip
            if not raced or attempt == tries - 1:
                raise
            time.sleep(0.2 * (attempt + 1) * (1 + random.random()))
    raise AssertionError("unreachable")


def _made_already(optuna: Any, url: str, name: str) -> Any:
    """The PostgreSQL study ``name`` when it is made already, else None.

    Its row in Optuna's ``studies`` is written after Optuna's tables and their
    version rows, so once it is there opening the study writes nothing and
    needs no lock.  None too when the server cannot be read now (full for a
    moment): the opening under the lock tries again and says what failed."""
    import sqlalchemy as sa  # lazy: optuna imports it anyway

    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            if conn.execute(sa.select(sa.func.to_regclass("studies"))).scalar() is None:
                return None
            made = conn.execute(sa.text("select 1 from studies where study_name = :name"),
                                {"name": name}).first() is not None  # fmt: skip
    except sa.exc.DBAPIError:
        return None
    finally:
        engine.dispose()
    if not made:
        return None
    rdb = optuna.storages.RDBStorage(url, engine_kwargs={"pool_size": 1, "max_overflow": 4},
                                     skip_table_creation=True)  # fmt: skip
    return optuna.load_study(study_name=name, storage=rdb)


@contextlib.contextmanager
def _one_at_a_time(url: str | None) -> Any:
    """Hold PostgreSQL's advisory lock for opening studies (nothing without a URL)."""
    if url is None:
        yield
        return
    import sqlalchemy as sa  # lazy: optuna imports it anyway

    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            key = int.from_bytes(hashlib.sha256(b"iopilot: open a study").digest()[:8], "big",
                                 signed=True)  # fmt: skip
            conn.execute(sa.select(sa.func.pg_advisory_lock(key)))
            conn.commit()  # the lock is the session's: it is let go when the connection closes
            yield
    finally:
        engine.dispose()


def optuna_state(name: str) -> Any:
    """Optuna's trial state ``name`` (FAIL, COMPLETE ...)."""
    import optuna  # lazy: 0.4 s to import; tune/ is loaded by `bench` and `--help` too

    return getattr(optuna.trial.TrialState, name)


def storage_url(url: str) -> str:
    """A plain ``postgresql://`` URL names the psycopg2 driver before SQLAlchemy
    2.1; when only psycopg 3 is installed, say so in the URL."""
    import importlib.util

    if not isinstance(url, str):  # a storage object (in memory: replays of a measured table)
        return url
    if url.startswith("postgresql://") and importlib.util.find_spec("psycopg2") is None \
            and importlib.util.find_spec("psycopg") is not None:  # fmt: skip
        return "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return url
