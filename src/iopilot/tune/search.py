"""Search strategies: which point to measure next.

Every strategy derives its next point from the study's history alone (and
``--seed``), so a study that was stopped and started again carries on where
it was, and two studies with the same seed and the same measurements propose
the same points.  A point already measured is never proposed again.

``grid``    every combination, in order.
``random``  uniform draws (one random stream per trial number).
``ga``      DEAP's genetic algorithm: tournament selection, uniform
            crossover, per-gene mutation, the best kept (elitism).
``tpe``     Optuna's Tree-structured Parzen Estimator.
``guided``  the default, then one setting changed at a time from the best
            so far (the settings the diagnosis points at first), then TPE
            seeded with all of it; stops when the best has not improved by
            more than the noise for ``PATIENCE`` trials.
"""

from __future__ import annotations

import math
import random
import statistics
import warnings
from collections.abc import Callable
from typing import Any

from .._record import field, record
from .space import Param, Space, point_key

OWNER = "iopilot_owner"  # "host:pid" of the worker that asked for a running trial


def owner() -> str:
    import os
    import socket

    return f"{socket.gethostname()}:{os.getpid()}"

STRATEGIES = ("guided", "tpe", "ga", "random", "grid")
WARM = "warm start"  # the phase of a point that won a similar job's tuning
PATIENCE = 4  # model-based trials without a real improvement before guided stops
DRAWS = 200  # random draws before a space counts as exhausted


@record
class Record:
    """A measured trial, as the study keeps it."""

    number: int
    point: dict[str, Any]
    runs: list[float]  # objective values of its runs
    loss: float  # the median, as a cost (lower is better); inf when failed
    status: str  # "ok" or "failed"
    reason: str = ""
    phase: str = ""
    walls: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return point_key(self.point)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@record
class Proposal:
    point: dict[str, Any]
    phase: str
    trial: Any = None  # an Optuna trial asked for (tpe), told when measured
    extra: dict[str, Any] = field(default_factory=dict)


@record
class Context:
    """What a strategy may look at."""

    space: Space
    history: list[Record]
    seed: int
    budget: int  # trials in all, the default included
    noise: float  # relative spread of the default's runs
    study: Any  # the Optuna study
    ranking: list[str]  # parameter names, those the diagnosis names first
    loss_of: Callable[[float], float]  # objective value -> cost
    repeats: int = 1  # runs a confirmed point has (the default's)

    def seen(self) -> dict[str, Record]:
        return {r.key: r for r in self.history}


class Strategy:
    name = ""

    def next(self, ctx: Context) -> Proposal | None:
        """The next point to measure; None when the strategy has nothing left."""
        raise NotImplementedError

    stopped = ""  # why next() returned None


class Grid(Strategy):
    name = "grid"

    def next(self, ctx: Context) -> Proposal | None:
        seen = ctx.seen()
        for p in ctx.space.grid():
            if point_key(p) not in seen:
                return Proposal(p, "grid")
        self.stopped = "every point of the grid was measured"
        return None


class Random(Strategy):
    name = "random"

    def next(self, ctx: Context) -> Proposal | None:
        seen = ctx.seen()
        rng = random.Random(f"{ctx.seed}/random/{len(ctx.history)}")
        for _ in range(DRAWS):
            p = ctx.space.sample(rng)
            if point_key(p) not in seen:
                return Proposal(p, "random")
        self.stopped = f"{DRAWS} draws gave only points already measured"
        return None


def _quiet_optuna() -> None:
    import optuna  # lazy: 0.4 s to import; tune/ is loaded by `bench` and `--help` too

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def tpe_sampler(seed: int, startup: int) -> Any:
    import optuna  # lazy: 0.4 s to import; tune/ is loaded by `bench` and `--help` too

    _quiet_optuna()
    # multivariate + group: conditional parameters are modelled together with
    # the choices that switch them on.
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True,
                                      group=True)  # fmt: skip


class TPE(Strategy):
    name = "tpe"
    phase = "tpe"

    def __init__(self) -> None:
        self.sampler: Any = None

    def startup(self, ctx: Context) -> int:
        return max(3, min(8, ctx.budget // 3))

    def next(self, ctx: Context) -> Proposal | None:
        import optuna  # lazy: 0.4 s to import; tune/ is loaded by `bench` and `--help` too

        if self.sampler is None:
            self.sampler = tpe_sampler(ctx.seed, self.startup(ctx))
        ctx.study.sampler = self.sampler
        seen = ctx.seen()
        for _ in range(DRAWS // 4):
            trial = ctx.study.ask()
            trial.set_user_attr(OWNER, owner())  # a restart fails it only if we are gone
            point = ctx.space.suggest(trial)
            # a default's value proposed (False for a bool) is the default's own point
            old = seen.get(point_key(point)) or seen.get(point_key(ctx.space.canonical(point)))
            if old is None:
                return Proposal(point, self.phase, trial=trial)
            # Already measured: tell the model what it gave, without running it again.
            trial.set_user_attr("duplicate_of", old.number)
            if old.ok:
                ctx.study.tell(trial, statistics.median(old.runs))
            else:
                ctx.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        self.stopped = "the model proposed only points already measured"
        return None


class Guided(TPE):
    name = "guided"
    phase = "model"

    def startup(self, ctx: Context) -> int:
        return 0  # the one-at-a-time trials are its start

    def next(self, ctx: Context) -> Proposal | None:
        p = self.one_at_a_time(ctx)
        if p is not None:
            return p
        if self.converged(ctx):
            self.stopped = (f"the best has not improved by more than the noise "
                            f"({100 * ctx.noise:.0f} %) for {PATIENCE} trials")  # fmt: skip
            return None
        return super().next(ctx)

    def one_at_a_time(self, ctx: Context) -> Proposal | None:
        """Replay the sweep over the history: for each parameter in rank order,
        each of its values from the best point so far; the first not measured.
        A similar job's winner that beats the default here is swept from
        first; then the default's sweep follows as without it, so a winner
        that was another job's local best costs trials but hides nothing."""
        seen = ctx.seen()
        default_loss = seen[point_key({})].loss if point_key({}) in seen else math.inf
        warm = [r for r in ctx.history if r.phase == WARM and r.ok
                and len(r.runs) >= ctx.repeats and r.loss < default_loss]  # fmt: skip
        if warm:
            p = self._sweep(ctx, seen, dict(min(warm, key=lambda r: r.loss).point))
            if p is not None:
                return p
        # After a warm winner, the default's sweep meets points measured once
        # (not promising beside that winner): it follows them all the same.
        return self._sweep(ctx, seen, {}, repeated=not warm)

    def _sweep(self, ctx: Context, seen: dict[str, Record], base: dict[str, Any],
               repeated: bool = True) -> Proposal | None:  # fmt: skip
        base_loss = seen[point_key(base)].loss if point_key(base) in seen else math.inf
        order = [ctx.space.by_name[n] for n in ctx.ranking]
        for param in order:
            if not ctx.space.active(param, base):
                continue
            tried = []
            for v in param.ladder():
                if base.get(param.name) == v:
                    continue
                cand = ctx.space.clean({**base, param.name: v})
                rec = seen.get(point_key(cand))
                if rec is None:
                    return Proposal(cand, f"one at a time: {param.name}")
                tried.append(rec)
            # A change is kept when its median, over as many runs as the default
            # had, beats the base's: whether that is a win is decided at the end.
            better = [r for r in tried if r.ok and r.loss < base_loss
                      and (len(r.runs) >= ctx.repeats or not repeated)]  # fmt: skip
            if better:
                best = min(better, key=lambda r: r.loss)
                base, base_loss = dict(best.point), best.loss
        return None

    def converged(self, ctx: Context) -> bool:
        best, since = math.inf, 0
        for r in ctx.history:
            if r.ok and r.loss < best * (1 - ctx.noise):
                best, since = r.loss, 0
            elif r.phase == self.phase:
                since += 1
        return since >= PATIENCE


# -- the genetic algorithm -------------------------------------------------------------

FAILED_FITNESS = 1e300  # a failed individual's cost: never selected over a working one


def _deap() -> tuple[Any, Any, Any]:
    from deap import base, creator, tools  # lazy: 0.1 s to import, the genetic strategy only

    if not hasattr(creator, "IopilotCost"):
        creator.create("IopilotCost", base.Fitness, weights=(-1.0,))
        creator.create("IopilotGenome", list, fitness=creator.IopilotCost)
    return base, creator, tools


class GA(Strategy):
    """Generations derived from the history: generation g+1 comes from the
    measured generation g and a random stream seeded with (seed, g)."""

    name = "ga"
    CXPB, MUTPB, TOURNAMENT = 0.7, 0.3, 3
    MAX_GENERATIONS = 60

    def population_size(self, ctx: Context) -> int:
        return max(4, min(10, (ctx.budget - 1) // 3))

    def next(self, ctx: Context) -> Proposal | None:
        _, creator, tools = _deap()
        seen = ctx.seen()
        params = ctx.space.params
        n = self.population_size(ctx)
        rng = random.Random(f"{ctx.seed}/ga/0")
        pop = [creator.IopilotGenome([p.sample(rng) for p in params]) for _ in range(n)]
        for gen in range(self.MAX_GENERATIONS):
            for genome in pop:
                point = self.decode(ctx.space, genome)
                rec = seen.get(point_key(point))
                if rec is None:
                    return Proposal(point, f"ga generation {gen}")
                genome.fitness.values = (rec.loss if rec.ok else FAILED_FITNESS,)
            known = set(seen)

            def fresh(genome: list[Any], known: set[str] = known) -> bool:
                key = point_key(self.decode(ctx.space, genome))
                new = key not in known
                known.add(key)
                return new

            pop = self.breed(pop, params, f"{ctx.seed}/ga/{gen + 1}", tools, fresh)
        self.stopped = f"{self.MAX_GENERATIONS} generations without a new point"
        return None

    @staticmethod
    def decode(space: Space, genome: list[Any]) -> dict[str, Any]:
        """The point a genome stands for: genes of inactive parameters are carried, not used."""
        point: dict[str, Any] = {}
        for p, v in zip(space.params, genome, strict=True):
            if space.active(p, point):
                point[p.name] = v
        return point

    def breed(self, pop: list[Any], params: list[Param], seed: str, tools: Any,
              fresh: Callable[[list[Any]], bool]) -> list[Any]:
        """Selection, crossover and mutation with DEAP's operators, which draw
        from the global `random`: seeded here, and its state given back after.
        An offspring that is a point already measured is mutated again (a few
        times at most): measuring it again would only spend a trial."""
        state = random.getstate()
        random.seed(seed)
        try:
            elite = tools.selBest(pop, 1)[0]
            offspring = [_clone(x) for x in tools.selTournament(pop, len(pop) - 1,
                                                                 tournsize=self.TOURNAMENT)]
            for a, b in zip(offspring[::2], offspring[1::2], strict=False):
                if random.random() < self.CXPB:
                    tools.cxUniform(a, b, indpb=0.5)
            for ind in offspring:
                if random.random() < self.MUTPB or len(params) == 1:
                    i = random.randrange(len(params))
                    ind[i] = params[i].sample(random)  # type: ignore[arg-type]
            for ind in offspring:
                for _ in range(8):
                    if fresh(ind):
                        break
                    i = random.randrange(len(params))
                    ind[i] = params[i].sample(random)  # type: ignore[arg-type]
            return [_clone(elite), *offspring]
        finally:
            random.setstate(state)


def _clone(genome: Any) -> Any:
    new = type(genome)(list(genome))
    return new


def make(name: str) -> Strategy:
    return {"grid": Grid, "random": Random, "tpe": TPE, "guided": Guided, "ga": GA}[name]()
