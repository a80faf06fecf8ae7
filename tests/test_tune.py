"""iopilot tune: search spaces, strategies, the noise rule and the generated space.

The strategies run against the real Optuna and DEAP with an objective that is
a plain function of the point, so their choices can be compared exactly.
"""

import math
import random
import statistics
from pathlib import Path

import optuna
import pytest

from iopilot import settings
from iopilot.errors import InputError
from iopilot.tune import search
from iopilot.tune.generate import generate, rank
from iopilot.tune.search import Context, Record
from iopilot.tune.space import from_dict, point_key
from iopilot.tune.study import noise_of, rank_test, store, verdict

SPACE = {
    "ompi": {"io": {"values": ["ompio", "romio321"], "default": "ompio"},
             "fcoll": {"values": ["vulcan", "two_phase"], "when": {"ompi.io": "ompio"}}},
    "mpiio": {
        "romio_cb_write": {"values": ["enable", "disable", "automatic"], "default": "automatic",
                           "when": {"ompi.io": "romio321"}},
        "cb_nodes": {"low": 1, "high": 8, "log": True,
                     "when": {"mpiio.romio_cb_write": "enable"}},
    },
    "stdio": {"buffer_size": {"values": ["4k", "1m"]}},
}


def _error(doc):
    with pytest.raises(InputError) as e:
        from_dict(doc, "space.toml")
    return str(e.value)


@pytest.mark.parametrize("doc, key", [
    ({"mpiio": {"nope": {"values": [1]}}}, "[mpiio.nope]"),
    ({"mpiio": {"romio_cb_write": {"values": ["on"]}}}, "[mpiio.romio_cb_write] values"),
    ({"mpiio": {"cb_nodes": {"values": [1, 1]}}}, "[mpiio.cb_nodes] values"),
    ({"mpiio": {"cb_nodes": {"low": 8, "high": 2}}}, "[mpiio.cb_nodes] low"),
    ({"mpiio": {"cb_nodes": {"low": 1}}}, "[mpiio.cb_nodes]"),
    ({"mpiio": {"cb_nodes": {"low": 0, "high": 4, "log": True}}}, "[mpiio.cb_nodes] low"),
    ({"mpiio": {"romio_cb_write": {"low": 1, "high": 2}}}, "[mpiio.romio_cb_write] low"),
    ({"mpiio": {"cb_nodes": {"values": [1], "stride": 2}}}, "[mpiio.cb_nodes] stride"),
    ({"mpiio": {"cb_nodes": {"values": [1], "when": {"ompi.io": "romio321"}}}},
     "[mpiio.cb_nodes] when: ompi.io"),
    ({"ompi": {"io": {"values": ["ompio"]}},
      "mpiio": {"cb_nodes": {"values": [1], "when": {"ompi.io": "romio"}}}},
     "[mpiio.cb_nodes] when: 'romio'"),
    ({"ompi": {"io": {"values": ["a"], "when": {"ompi.fcoll": "x"}},
               "fcoll": {"values": ["x"], "when": {"ompi.io": "a"}}}}, "cycle"),
    ({"hdf5": {"alignment": {"low": "1k", "high": "1q"}}}, "[hdf5.alignment] high"),
    ({}, "no parameters"),
])
def test_space_errors_name_the_key(doc, key):
    msg = _error(doc)
    assert msg.startswith("space.toml: ") and key in msg, msg


def test_sizes_and_patterns_make_valid_settings():
    s = from_dict({"hdf5": {"alignment": {"low": "64k", "high": "1m", "log": True}},
                   "mpiio": {"files": {"*.h5": {"striping_factor": {"values": [1, 4]}}}}})
    assert s.by_name["hdf5.alignment"].domain() == [65536, 131072, 262144, 524288, 1048576]
    for point in s.grid():
        settings.validate(s.settings_doc(point), "point")
    doc = s.settings_doc({"mpiio.files.\"*.h5\".striping_factor": 4})
    assert doc == {"mpiio": {"files": {"*.h5": {"striping_factor": 4}}}}


def _respects_conditions(point):
    if "ompi.fcoll" in point:
        assert point.get("ompi.io", "ompio") == "ompio"
    if "mpiio.romio_cb_write" in point:
        assert point.get("ompi.io") == "romio321"
    if "mpiio.cb_nodes" in point:
        assert point.get("mpiio.romio_cb_write") == "enable"


def test_conditional_parameters_never_appear_without_their_condition():
    s = from_dict(SPACE)
    rng = random.Random(1)
    points = [s.sample(rng) for _ in range(300)] + s.grid()
    for p in points:
        _respects_conditions(p)
        assert s.valid(p)
    # and every parameter does appear where its condition holds
    assert any("mpiio.cb_nodes" in p for p in points)
    assert s.clean({"ompi.io": "ompio", "mpiio.romio_cb_write": "enable",
                    "mpiio.cb_nodes": 2}) == {"ompi.io": "ompio"}


def test_grid_enumerates_exactly():
    s = from_dict(SPACE)
    grid = s.grid()
    # ompio: 2 fcoll; romio321: enable x 4 cb_nodes (1,2,4,8) + disable + automatic; x 2 buffers
    assert len(grid) == (2 + (4 + 1 + 1)) * 2
    assert len({point_key(p) for p in grid}) == len(grid)
    expected = {("ompio", f, b) for f in ("vulcan", "two_phase") for b in ("4k", "1m")}
    assert {(p["ompi.io"], p["ompi.fcoll"], p["stdio.buffer_size"])
            for p in grid if p["ompi.io"] == "ompio"} == expected


def cost(point):
    """A made-up cost: romio321 with collective buffering off is best."""
    c = 10.0
    if point.get("ompi.io") == "romio321":
        c = 4.0
        c -= {"disable": 2.0, "enable": 0.5}.get(point.get("mpiio.romio_cb_write"), 0.0)
        c += 0.1 * math.log2(point.get("mpiio.cb_nodes", 1))
    elif point.get("ompi.fcoll") == "two_phase":
        c = 100.0
    return c + (0.3 if point.get("stdio.buffer_size") == "4k" else 0.0)


def drive(name, n=12, seed=3, space=SPACE, noise=0.0):
    """The study's loop with `cost` as the measurement, on the real Optuna."""
    s = from_dict(space)
    study = optuna.create_study(direction="minimize",
                                sampler=optuna.samplers.RandomSampler(seed=seed))
    strategy = search.make(name)
    default = store(study, s, Record(0, {}, [cost({})], cost({}), "ok", phase="default"), None)
    history = [default]
    while len(history) < n:
        ctx = Context(s, history, seed, n, noise, study, rank(s, []), lambda v: v)
        p = strategy.next(ctx)
        if p is None:
            break
        v = cost(p.point)
        history.append(store(study, s, Record(0, p.point, [v], v, "ok", phase=p.phase), p))
    return [r.point for r in history], strategy


@pytest.mark.parametrize("name", ["random", "tpe", "ga", "guided"])
def test_strategies_are_reproducible_and_never_repeat_a_point(name):
    a, _ = drive(name)
    b, _ = drive(name)
    c, _ = drive(name, seed=4)
    assert a == b
    keys = [point_key(p) for p in a]
    assert len(set(keys)) == len(keys)
    s = from_dict(SPACE)
    assert all(s.valid(p) for p in a)
    if name != "guided":  # guided's first steps follow the diagnosis, not the seed
        assert a != c


def test_grid_strategy_stops_when_every_point_is_measured():
    points, strategy = drive("grid", n=100)
    assert len(points) == 1 + len(from_dict(SPACE).grid())
    assert "every point" in strategy.stopped


def test_guided_changes_one_setting_at_a_time_from_the_best_then_models_and_stops():
    points, strategy = drive("guided", n=40, noise=0.05)
    # ompi.io first (conditions before what they guard), romio_cb_write from romio321
    assert points[1] == {"ompi.io": "romio321"}
    assert {"ompi.io": "romio321", "mpiio.romio_cb_write": "disable"} in points[:6]
    best = min(points, key=cost)
    assert cost(best) <= 2.0
    assert len(points) < 40 and "has not improved" in strategy.stopped


def test_ga_uses_generations():
    points, _ = drive("ga", n=14)
    assert len(points) == 14
    assert min(cost(p) for p in points) < cost({})


def test_noise_rule_both_sides_of_the_edge():
    default = [1.00, 1.10, 1.05]
    assert noise_of(default) == pytest.approx(0.10 / 1.05)
    # 3 runs against 3, wholly apart: 1 chance in 20 of noise, above ALPHA
    assert rank_test(default, [0.90, 0.95, 0.99], maximize=False) == pytest.approx(1 / 20)
    assert verdict(default, [0.90, 0.95, 0.99], maximize=False) == "within noise"
    five = [1.00, 1.10, 1.05, 1.02, 1.08]
    # 5 against 5 wholly apart: 1/252 <= ALPHA, a win; one pair crossing: 2/252, still
    assert verdict(five, [0.90, 0.95, 0.99, 0.97, 0.93], maximize=False) == "win"
    assert rank_test(five, [0.90, 0.95, 0.99, 0.97, 1.01], False) == pytest.approx(2 / 252)
    # two pairs crossing: 3/252 = 0.012 > ALPHA
    assert verdict(five, [0.90, 0.95, 0.99, 1.01, 1.03], maximize=False) == "within noise"
    assert verdict([100, 120, 110, 105, 115], [121, 130, 125, 126, 140], maximize=True) == "win"
    assert verdict([100, 120, 110, 105, 115], [119, 130, 125, 126, 140], True) == "win"
    assert verdict([100, 120, 110, 105, 115], [100, 120, 110, 105, 115], True) == "within noise"
    assert verdict([1.0], [0.5], maximize=False) == "noise unknown"


def test_generated_space_follows_the_findings():
    observed = {"layers": ["MPI-IO", "POSIX"], "nprocs": 4, "findings": [
        {"check": "mpiio-time-above-posix", "layer": "MPIIO", "level": "WARN",
         "cost_seconds": 0.4},
        {"check": "posix-shared-small-writes", "layer": "POSIX", "level": "WARN",
         "cost_seconds": 0.01}]}
    s = generate(observed)
    names = rank(s, observed["findings"])
    assert names[0] == "ompi.io"
    assert names.index("mpiio.romio_cb_write") < names.index("mpiio.cb_nodes")
    assert not any(n.startswith("hdf5.") for n in names)
    assert s.by_name["mpiio.cb_nodes"].high == 4
    rng = random.Random(0)
    for _ in range(100):
        p = s.sample(rng)
        settings.validate(s.settings_doc(p), "generated")
    hdf5 = generate({"layers": ["H5D", "H5F", "MPI-IO", "POSIX"], "nprocs": 2, "findings": [
        {"check": "hdf5-metadata-reads", "layer": "HDF5", "level": "WARN",
         "cost_seconds": 1.0}]})
    assert rank(hdf5, [{"check": "hdf5-metadata-reads", "layer": "HDF5", "level": "WARN",
                        "cost_seconds": 1.0}])[0] == "hdf5.coll_metadata_ops"
    with pytest.raises(InputError, match="nothing to tune"):
        generate({"layers": ["POSIX"], "findings": []})


def test_a_settings_weight_is_the_seconds_of_the_problems_that_point_at_it():
    """Each WARN or HIGH finding adds its cost (plus a microsecond: a cheap
    problem still counts) to the settings its check points at, the first of
    them whole and each later one a tenth less; a hundredth of it to every
    setting of its layer's tables; OK and INFO findings add nothing."""
    from iopilot.tune.generate import weights

    w = weights([
        {"check": "mpiio-blocking", "layer": "MPIIO", "level": "WARN", "cost_seconds": 2.0},
        {"check": "hdf5-chunking", "layer": "HDF5", "level": "HIGH", "cost_seconds": None},
        {"check": "stdio-small", "layer": "STDIO", "level": "INFO", "cost_seconds": 9.0},
        {"check": "hdf5-chunking", "layer": "HDF5", "level": "OK", "cost_seconds": 9.0},
    ])  # fmt: skip
    c = 2.0 + 1e-6
    assert w == pytest.approx({"ompi.io": c, "ompi.fcoll": c / 1.1, "mpiio.*": 0.01 * c,
                               "ompi.*": 0.01 * c, "hdf5.chunk": 1e-6, "hdf5.*": 1e-8},
                              rel=1e-12, abs=0)  # fmt: skip
    # two findings pointing at one setting: their seconds add up
    two = weights([{"check": "hdf5-chunking", "layer": "HDF5", "level": "WARN",
                    "cost_seconds": 1.0}] * 2)  # fmt: skip
    assert two["hdf5.chunk"] == pytest.approx(2 * (1.0 + 1e-6), rel=1e-12)


def test_rank_puts_the_heavier_setting_first_and_a_condition_before_what_it_guards():
    space = from_dict({"ompi": {"io": {"values": ["romio321", "ompio"]},
                                "fcoll": {"values": ["two_phase", "vulcan"],
                                          "when": {"ompi.io": "ompio"}}},
                       "stdio": {"buffer_size": {"values": ["64k", "1m"]}}})  # fmt: skip
    stdio = {"check": "stdio-small", "layer": "STDIO", "level": "WARN"}
    # the buffer weighs more: it comes first; io comes before fcoll, which it guards
    assert rank(space, [dict(stdio, cost_seconds=3.0)]) == [
        "stdio.buffer_size", "ompi.io", "ompi.fcoll"]  # fmt: skip
    # fcoll weighs more than the buffer: its condition comes first, before it
    fcoll = {"check": "mpiio-blocking", "layer": "MPIIO", "level": "WARN", "cost_seconds": 5.0}
    assert rank(space, [dict(stdio, cost_seconds=3.0), fcoll]) == [
        "ompi.io", "ompi.fcoll", "stdio.buffer_size"]  # fmt: skip
    # nothing weighs: the space's own order
    assert rank(space, []) == ["ompi.io", "ompi.fcoll", "stdio.buffer_size"]
    # a condition keeps its own weight when what it guards weighs less
    guarded = from_dict({"ompi": {"io": {"values": ["romio321", "ompio"]}},
                         "stdio": {"buffer_size": {"values": ["64k", "1m"],
                                                   "when": {"ompi.io": "ompio"}}},
                         "lustre": {"stripe_count": {"values": [1, 4]}}})  # fmt: skip
    lustre = {"check": "lustre-stripe-small", "layer": "LUSTRE", "level": "WARN",
              "cost_seconds": 3.0}  # fmt: skip
    assert rank(guarded, [dict(stdio, cost_seconds=1.0), lustre, fcoll]) == [
        "ompi.io", "lustre.stripe_count", "stdio.buffer_size"]  # fmt: skip


def test_generated_space_tries_each_hdf5_setting_the_table_gives_values() -> None:
    """A program using HDF5 gets every [hdf5] name that carries ``tune``
    values in its generated space, with those values (and no other name but
    the MPI-IO ones)."""
    table = {f"hdf5.{s.name}": list(s.tune) for s in settings.SETTINGS
             if s.table == "hdf5" and s.tune}  # fmt: skip
    assert "hdf5.alignment" in table
    serial = generate({"layers": ["H5D", "H5F", "POSIX"], "nprocs": 1, "findings": []})
    assert {p.name: p.values for p in serial.params if p.name.startswith("hdf5.")} == table
    parallel = generate({"layers": ["H5D", "MPI-IO"], "nprocs": 2, "findings": []})
    names = {p.name for p in parallel.params if p.name.startswith("hdf5.")}
    assert names == set(table) | {"hdf5.coll_metadata_ops", "hdf5.transfer"}


def _posix(reads: int, writes: int, large: int, misaligned: int) -> dict:
    return {"layers": ["POSIX"], "findings": [], "nprocs": 1, "layer_summaries": [
        {"layer": "POSIX", "reads": reads, "writes": writes, "large_requests": large,
         "misaligned": misaligned}]}  # fmt: skip


@pytest.mark.parametrize(("reads", "writes", "large", "misaligned", "offered"), [
    (0, 64, 64, 0, True),
    (10, 10, 10, 5, True),     # half large, a quarter misaligned: both edges in
    (10, 10, 9, 0, False),     # one large request short of half
    (10, 10, 10, 6, False),    # one misaligned request past a quarter
    (0, 0, 0, 0, False),       # no POSIX data at all
])  # fmt: skip
def test_generated_space_offers_direct_io_for_large_aligned_posix(reads, writes, large,
                                                                  misaligned, offered):
    from iopilot.tune.generate import direct_io_fits

    observed = _posix(reads, writes, large, misaligned)
    assert direct_io_fits(observed) is offered
    if not offered:
        with pytest.raises(InputError, match="nothing to tune"):
            generate(observed)
        return
    s = generate(observed)
    assert [p.name for p in s.params] == ["posix.direct", "posix.direct_min_size"]
    assert s.by_name["posix.direct_min_size"].when == {"posix.direct": [True]}
    rng = random.Random(0)
    docs = [s.settings_doc(s.sample(rng)) for _ in range(50)]
    for d in docs:
        settings.validate(d, "generated")
    assert {bool(d.get("posix", {}).get("direct")) for d in docs} == {False, True}


def test_record_median():
    r = Record(0, {}, [3.0, 1.0, 2.0], 2.0, "ok")
    assert statistics.median(r.runs) == 2.0 and r.key == "[]"


def test_postgresql_urls_name_the_installed_driver():
    import importlib.util

    from iopilot.tune.study import storage_url

    assert storage_url("sqlite:///x.db") == "sqlite:///x.db"
    assert storage_url("postgresql+psycopg2://h/db") == "postgresql+psycopg2://h/db"
    only_v3 = importlib.util.find_spec("psycopg2") is None and importlib.util.find_spec("psycopg")
    want = "postgresql+psycopg://u@h/db" if only_v3 else "postgresql://u@h/db"
    assert storage_url("postgresql://u@h/db") == want


def test_a_restart_fails_only_the_running_trials_of_gone_local_workers(tmp_path):
    import subprocess

    import optuna

    from iopilot.tune import search
    from iopilot.tune.study import Options, Study

    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(storage=url, study_name="s")
    host = search.owner().rsplit(":", 1)[0]
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer runs
    owners = {"dead": f"{host}:{gone.pid}", "alive": search.owner(),
              "elsewhere": "another-node:1", "unowned": None}  # fmt: skip
    numbers = {}
    for name, who in owners.items():
        t = study.ask()
        if who:
            t.set_user_attr(search.OWNER, who)
        numbers[name] = t.number
    Study(Options(command=["true"], storage=url, study_name="s", work=tmp_path / "w"),
          lambda d: None, None)  # fmt: skip
    states = {n: study.get_trials(deepcopy=False)[i].state for n, i in numbers.items()}
    running, failed = optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.FAIL
    assert states == {"dead": failed, "alive": running, "elsewhere": running,
                      "unowned": running}  # fmt: skip


def test_workers_of_one_study_never_measure_a_point_twice(tmp_path):
    """Worker B's first candidate is still being measured when worker A runs a
    whole study on the same storage: A leaves B's point alone, and B goes on
    from A's results instead of measuring them again."""
    from iopilot.tune.claims import claims_for
    from iopilot.tune.objective import Run
    from iopilot.tune.study import Options, Study

    space = from_dict(SPACE)
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    measured: list[tuple[str, str]] = []

    def cost(point):  # a plain function of the point, no program run
        return 1.0 + 0.1 * len(point_key(point)) % 7

    class Worker(Study):
        name = ""
        during_first = None  # something to do while measuring the first candidate

        def _measure_point(self, point, n, runs, timeout, keep_findings=False, more=None):
            if point and self.during_first is not None:
                todo, self.during_first = self.during_first, None
                todo()
            measured.append((self.name, point_key(point)))
            return [Run(cost(point), 0.01) for _ in range(runs)], ""

    def worker(name, trials, work):
        w = Worker(Options(command=["app"], objective="wall", strategy="guided", trials=trials,
                           repeats=1, storage=url, study_name="s", work=tmp_path / work),
                   lambda _observed: space, None)  # fmt: skip
        w.name = name
        return w

    b = worker("B", 8, "b")
    b.during_first = lambda: worker("A", 5, "a").run()
    b.run()
    points = [k for _, k in measured]
    assert len(points) == len(set(points)), measured
    assert {w for w, _ in measured} == {"A", "B"} and len(points) == 8
    claims = claims_for(url, f"s#{optuna.load_study(study_name='s', storage=url)._study_id}")
    assert sorted(c.key for c in claims.all()) == sorted(points)
    assert {c.state for c in claims.all()} == {"done"}


def test_generated_space_reads_hdf5_from_the_traces_layer_names():
    """A trace names HDF5's layers H5D and H5F: a serial HDF5 program gets
    the [hdf5] settings and no MPI-IO ones; a parallel one both."""
    serial = generate({"layers": ["H5D", "H5F"], "nprocs": 1, "findings": []})
    names = {p.name.split(".")[0] for p in serial.params}
    assert names == {"hdf5"}
    parallel = generate({"layers": ["H5D", "H5F", "MPI-IO", "POSIX"], "nprocs": 2,
                         "findings": []})  # fmt: skip
    names = {p.name for p in parallel.params}
    assert {"hdf5.transfer", "hdf5.coll_metadata_ops", "ompi.io"} <= names


def test_generated_space_holds_no_layer_the_program_did_not_use():
    """An MPI program whose I/O is all POSIX: findings about MPI (a layer
    they name) add no MPI-IO setting, which could not change its I/O."""
    observed = {"layers": ["POSIX"], "nprocs": 4, "findings": [
        {"check": "mpiio-collective-writes", "layer": "MPI-IO", "level": "WARN",
         "cost_seconds": 0.5},
        {"check": "posix-shared-small-writes", "layer": "POSIX", "level": "WARN",
         "cost_seconds": 0.5}]}  # fmt: skip
    with pytest.raises(InputError, match="nothing to tune"):
        generate(observed)
    observed["layers"] = ["POSIX", "STDIO"]
    names = {p.name for p in generate(observed).params}
    assert names == {"stdio.buffer_size"}


def test_generated_space_tries_chunk_shapes_from_the_chunking_finding():
    """Tiny chunks: the shapes tried are the finding's suggestion, half and
    twice it; without that finding no chunk shape is tried."""
    finding = {"check": "hdf5-chunking", "layer": "H5D", "level": "WARN", "cost_seconds": 1.0,
               "evidence": {"chunk_dims": "[8, 8, 8]", "suggested_dims": "[64, 64, 64]"}}
    s = generate({"layers": ["H5D", "H5F"], "nprocs": 1, "findings": [finding]})
    assert s.by_name["hdf5.chunk"].values == [[64, 64, 64], [32, 32, 32], [128, 128, 128]]
    assert rank(s, [finding])[0] == "hdf5.chunk"
    plain = generate({"layers": ["H5D", "H5F"], "nprocs": 1, "findings": []})
    assert "hdf5.chunk" not in plain.by_name
    finding["evidence"] = {}
    assert "hdf5.chunk" not in generate({"layers": ["H5D"], "findings": [finding]}).by_name


MIB = 1024 * 1024


@pytest.mark.parametrize(("touched", "sizes"), [
    (MIB, None),                        # the chunks one access touches fit the default cache
    (MIB + 1, ["2m", "4m"]),            # one byte more: room for them and twice that
    (2 * MIB, ["2m", "4m"]),            # a power of two is its own room
    (2 * MIB + 1, ["4m", "8m"]),
    (8 * MIB, ["8m", "16m"]),           # 2 chunks of 4 MiB
    (512 * MIB, ["512m", "1g"]),
    (512 * MIB + 1, ["1g"]),            # at most 1 GiB
])  # fmt: skip
def test_generated_space_sizes_the_chunk_cache_from_the_chunks_one_access_touches(
        touched, sizes):  # fmt: skip
    """The chunk cache sizes tried hold every chunk one access touches, rounded up
    to a power of two, and twice that; none when they fit HDF5's 1 MiB default."""
    finding = {"check": "hdf5-chunk-cache", "layer": "H5D", "level": "WARN", "cost_seconds": 1.0,
               "evidence": {"chunk_bytes_per_access": touched}}  # fmt: skip
    s = generate({"layers": ["H5D", "H5F"], "nprocs": 1, "findings": [finding]})
    got = s.by_name["hdf5.chunk_cache_size"].values if sizes else None
    assert got == sizes and ("hdf5.chunk_cache_size" in s.by_name) == bool(sizes)
    if sizes:
        assert rank(s, [finding])[0] == "hdf5.chunk_cache_size"
        for v in sizes:
            assert settings.parse_size(v) >= touched or v == "1g"


def test_generated_space_tries_no_chunk_cache_without_the_finding():
    """No chunk-cache finding (or one without the bytes): no cache is tried, the
    settings table giving none of its own."""
    plain = generate({"layers": ["H5D", "H5F"], "nprocs": 1, "findings": []})
    assert "hdf5.chunk_cache_size" not in plain.by_name
    bare = {"check": "hdf5-chunk-cache", "layer": "H5D", "level": "WARN", "evidence": {}}
    assert "hdf5.chunk_cache_size" not in generate({"layers": ["H5D"],
                                                     "findings": [bare]}).by_name  # fmt: skip


def test_a_model_trial_never_measures_the_default_again():
    """A bool whose default is False: the model may propose False, which is
    the default's own setting; it is then not measured a second time."""
    space = {"posix": {"direct": {"values": [False, True], "default": False}},
             "stdio": {"buffer_size": {"values": ["64k", "1m"], "default": "64k"}}}  # fmt: skip
    s = from_dict(space)
    assert s.canonical({"posix.direct": False, "stdio.buffer_size": "1m"}) == {
        "stdio.buffer_size": "1m"}
    assert s.canonical({"posix.direct": True}) == {"posix.direct": True}
    for name in ("tpe", "guided"):
        points, _ = drive(name, n=10, space=space)
        keys = [point_key(s.canonical(p)) for p in points]
        assert len(set(keys)) == len(keys), (name, points)


def test_every_parameter_is_listed_by_the_command_and_in_the_readme():
    """`iopilot tune --list-parameters` names every setting with what a
    generated space tries; README carries the same list."""
    from iopilot.tune.generate import parameter_lines

    lines = parameter_lines()
    names = [f"{s.table}.{s.name}" for s in settings.SETTINGS]
    assert [ln.split()[0] for ln in lines] == names
    chunk = next(ln for ln in lines if ln.startswith("hdf5.chunk "))
    assert "chunking finding" in chunk and "[64, 64, 64]" in chunk
    cache = next(ln for ln in lines if ln.startswith("hdf5.chunk_cache_size "))
    assert "in part" in cache and "4m, 8m for 3 MiB" in cache
    ompi = next(ln for ln in lines if ln.startswith("ompi.io "))
    assert "tried with MPI-IO calls: ompio, romio321" in ompi
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert all(ln in readme for ln in lines), [ln for ln in lines if ln not in readme][:3]


@pytest.mark.parametrize(("later", "stops"), [
    (5.0, True),   # exactly the noise (50 %) below the best: no real improvement
    (4.99, False),  # a little more than the noise: the count starts again
])  # fmt: skip
def test_guided_stops_after_trials_that_improve_by_no_more_than_the_noise(later, stops):
    s = from_dict(SPACE)
    g = search.make("guided")
    history = [Record(0, {}, [10.0], 10.0, "ok", phase="default")]
    history += [Record(i, {}, [later], later, "ok", phase=g.phase)
                for i in range(1, search.PATIENCE + 1)]  # fmt: skip
    ctx = Context(s, history, 1, 20, 0.5, None, [], lambda v: v)
    assert g.converged(ctx) is stops


def test_a_points_key_is_the_same_text_whatever_the_order_of_its_settings():
    """Keys are stored in a study's database: a worker or a later run that
    joins the study must spell them the same way."""
    key = point_key({"stdio.buffer_size": "1m", "mpiio.cb_nodes": 2})
    assert key == '[["mpiio.cb_nodes",2],["stdio.buffer_size","1m"]]'
    assert key == point_key({"mpiio.cb_nodes": 2, "stdio.buffer_size": "1m"})
    assert point_key({}) == "[]"


@pytest.mark.parametrize("default_s, other_s, want", [(1.0, 2.0, "the default was best"),
                                                      (2.0, 1.0, "win")])  # fmt: skip
def test_a_default_that_is_best_is_not_confirmed_against_itself(tmp_path, default_s, other_s,
                                                                 want):  # fmt: skip
    """Every other point slower than the default: the verdict says the default
    was best, with no confirmation runs (which would time the default against
    itself); a faster point is confirmed against the default and wins."""
    from iopilot.tune.objective import Run
    from iopilot.tune.study import CONFIRM, Options, Study

    space = from_dict({"ompi": {"fcoll": {"values": ["a", "b"]}}})
    measured: list[tuple[str, dict]] = []

    class Timed(Study):
        def _measure_point(self, point, n, runs, timeout, keep_findings=False, more=None):
            measured.append((str(n), dict(point)))
            return [Run(other_s if point else default_s, 0.01) for _ in range(runs)], ""

    study = Timed(Options(command=["app"], objective="wall", strategy="grid", trials=3,
                          repeats=2, storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s",
                          work=tmp_path / "w"), lambda _observed: space, None)  # fmt: skip
    out = study.run()
    confirms = [p for n, p in measured if n.startswith("confirm")]
    assert out.verdict == want
    if want == "win":
        assert len(confirms) == 2 * CONFIRM and sum(1 for p in confirms if p) == CONFIRM
        assert out.best.point != {}
    else:
        assert confirms == [] and out.best.point == {}
