"""The auto-tuner against fixed values: drain time, settling after a rate step, changes at a steady rate, rows per
insert call against a slow proxy, and a workload that dies of memory uncapped.

Scenarios 2-4 drive the real `AutotuneCheck` (collect from a real status store and the embedded cluster's tuning
document, evaluate, decide, apply with `write_tuning`) against a SIMULATED query in a `World` of its own, not the
tuner's model: a processing-time trigger of `TRIGGER` seconds, `PARTITIONS` partitions, each batch's time in phases
(planning, reads that cost per call of at most `READ_BATCH_ROWS` rows, decoding, a transformation whose cost per row
grows with the batch, Spark's trigger), a log-normal noise and now and then a stall no cap causes; the phases reach
the tuner as the phases check would give them (`QueryStatus.phases`), so the tuner's rule "raise only where per-batch
costs bind" is exercised. A batch starts at the next tick after the previous one ends and reads min(caps, available)
rows per partition. The caps a batch reads are those in force when it is planned, i.e. right after the previous
batch ends and BEFORE the tuner sees that batch (the one-batch delay). Memory: a batch's peak grows faster than its
rows (`World.peak`); where the OOM check runs, a stand-in (`MemoryStore`) reports its verdict on the world's memory,
the risk of the batch the caps in force plan and the safe row and byte caps at the OOM risk target. Constants
are of this machine's order (~0.35 s per micro-batch outside the tasks, ~100k rows/s per partition); none is fitted
to what the tuner does.

1. Memory (real Spark, a child driver with `spark.driver.memory=512m`, `foreachBatch` + `toPandas()`, 1 KB rows):
   uncapped, then with the tuner (mode apply, defaults) starting uncapped: `oom_failures` of each.
2. Drain of a backlog of `BACKLOG_ROWS` per partition with the tuner from a cap 10x too small and 10x too large
   (the tuner runs once before the first batch, as the runner does), against the best fixed cap of a sweep (the
   shortest drain whose batches all met the target, stalls aside, and stayed within the OOM risk target):
   `drain_ratio` (tuner / best fixed, the worse start; goal <= 1.15) with the OOM check's verdict and memory to
   spare, `drain_ratio_no_oom_check` with the risk unknown (the OOM check off, e.g. `spark.ui.enabled=false`: raises
   by at most `max_step_up_unknown_risk`), `drain_ratio_memory_bound` where memory binds before time; and
   `over_memory_batches`, tuned batches whose peak passed the world's limit (each an out-of-memory failure; goal 0).
3. A 10x step of the input rate from a settled state: `settle_batches`, batches after the step until every batch
   is settled: within the target (stalls aside) and reading at least `SETTLED_SHARE` of the rows that meet it, or
   all that waits (a cap cut far too small meets the target while the backlog grows); with the OOM check's verdict
   (goal <= 10) and without it (`settle_batches_no_oom_check`: raises then go by at most
   `max_step_up_unknown_risk`).
4. A steady input rate, 300 batches: knob changes per 100 batches after the first 50 (`changes_per_100`, goal
   <= 2): noise and stalls the tuner must not chase.
5. `dynBatchSize`: the real sink path (`write_rows`' chunking, its write statistics, the commit that stores them,
   the tuner's apply) on the embedded cluster behind a simulated proxy (`SlowProxy`) whose insert call costs
   `CALL_SECONDS` + `ROW_SECONDS` x rows, slower per row past `PROXY_BEST_CALL_ROWS` (oversized calls are
   punished: bigger is not always better; slept, rows not stored); 10 batches of 2 tasks x 400k rows, tuned (from
   50000) against the default 50000: `rows_ratio` (goal >= 1.0; it fails when the tuner grows calls past the
   proxy's best size), `best_call_ratio` (the proxy's best call size over the default, what a perfect tuner would
   reach), and `max_call_rows` (<= 100000).

6. Row width (real Spark, `bench.autotune_memory --width`, skipped with `--no-spark`): the workload of scenario 1
   over rows whose width grows 10x mid-stream (100 bytes, then 1 KB, 200k of each per partition, a queue with
   `$cumulative_data_weight`), run with a row cap that is safe for the narrow rows alone, with that row cap and a
   byte cap, and tuned (mode apply) from the row cap alone: `width_*_oom_failures` (goal 0 with the byte cap).

What it cannot show: a real cluster's costs (the world's shape is an assumption: costs in steps per read call,
growing per row, stalls), the OOM check's own errors in scenarios 2-4 (its stand-in knows the world's memory
exactly; `bench.oom_risk` judges the model), a proxy's real response to call sizes (the penalty past the best size
is invented to be non-monotone, and its calls are slept without noise, so the search's median of samples is not
exercised there), and more than one query sharing the machine. The world's costs grow smoothly with the rows, which
the tuner's local relation (a power of the rows near the newest size) follows well between two sizes; a world with
a cliff (costs that jump past some size, a spill) is not simulated. Without the OOM check a raise is bounded by
`max_step_up_unknown_risk` (1.25 by default), so the ramp from the blind first cap to the fixed point takes at
least log(fixed point / first cap) / log(1.25) raises of two batches each: `drain_ratio_no_oom_check` and
`settle_batches_no_oom_check` show that setting's cost as much as the tuner's.

Run: `python -m bench.autotune` (add `--no-spark` to skip scenarios 1 and 6). Last line: one JSON object.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any
from unittest import mock

import pyarrow as pa
from prometheus_client import CollectorRegistry
from pyspark.sql import types as T

from opsd.checks.autotune.check import AutotuneCheck, targets_for
from opsd.collect.positions import PositionsCollector
from opsd.config.models import OpsdConfig
from opsd.config.thresholds import OOM_RISK_TARGET
from opsd.observe.phases import BatchPhases, shares_of
from opsd.observe.progress import BatchSummary
from opsd.observe.recorder import Recorder
from opsd.observe.status import RECENT_BATCHES, QueryStatus, StatusStore
from opsd.results.oom import OomVerdict
from opsd.telemetry.logs import configure_logging
from opsd.telemetry.metrics import Metrics
from streaming_core import sink
from streaming_core.cluster import Cluster, connect
from streaming_core.cluster.base import MAX_ROWS_PER_TABLET_TRANSACTION, READ_BATCH_ROWS
from streaming_core.options import DEFAULT_DYN_BATCH_SIZE, SinkOptions
from streaming_core.phases import DECODE_ROWS, PHASES, PLANNING, READ_WAIT, SPARK_OTHER, TRANSFORM
from streaming_core.tuning import max_bytes_in_force, max_rows_in_force, read_tuning, write_tuning

TRIGGER, PARTITIONS = 10.0, 4
#: Data weight of a simulated row (what a byte cap counts).
ROW_BYTES = 120
BACKLOG_ROWS = 30_000_000
TARGET_SHARE = 0.7
CALL_SECONDS, ROW_SECONDS = 0.1, 1e-6
#: The simulated proxy's best call size and how much slower per row a call gets past it (x(1 + this) at twice it).
PROXY_BEST_CALL_ROWS, PROXY_OVERSIZE_PENALTY = 70_000, 3.0
SINK_BATCHES, SINK_TASKS, SINK_TASK_ROWS = 10, 2, 400_000
#: A batch after the rate step is settled when it meets the target and reads at least this share of the rows that
#: meet it (or all that waits): a cap cut far below the best one meets the target while the backlog grows.
SETTLED_SHARE = 0.75
DRAIN_GOAL, SETTLE_GOAL, CHANGES_GOAL, ROWS_GOAL, OVER_MEMORY_GOAL = 1.15, 10, 2.0, 1.0, 0


@dataclass(frozen=True)
class World:
    """What a simulated batch costs and holds, built from how Spark and the connector spend time, not from the
    tuner's model (a line of duration against rows): per batch a fixed planning and trigger cost; per read call of
    at most `READ_ROWS` rows (the source's Arrow bound) a latency, so reads cost in steps; per row decoding, and a
    transformation whose cost per row grows with the batch (`gc_knee_rows`: twice the per-row cost at that many rows
    per partition, the collector's share of a large batch); a multiplicative log-normal noise and, now and then, a
    stall of the whole trigger (a collector pause, a slow proxy call) that no cap causes. Memory: a batch's peak is
    `memory_base` + rows x `memory_per_row`, growing faster past `memory_knee_rows` (copies of a large batch),
    against `memory_limit`."""

    planning_seconds: float = 0.15
    trigger_seconds: float = 0.2
    read_call_seconds: float = 0.03
    decode_row_seconds: float = 2e-6
    transform_row_seconds: float = 5e-6
    gc_knee_rows: float = 600_000
    noise: float = 0.06
    stall_probability: float = 0.04
    stall_seconds: float = 2.0
    memory_base: float = 300e6
    memory_per_row: float = 1_500.0
    memory_knee_rows: float = 300_000
    memory_limit: float = 8e9

    def phases(self, rows: int, rng: random.Random) -> tuple[dict[str, float], float]:
        """The seconds of a batch reading `rows` per partition, by phase, and its stall (in `spark_other`)."""
        jitter = rng.lognormvariate(0.0, self.noise)
        stall = self.stall_seconds if rng.random() < self.stall_probability else 0.0
        seconds = {
            PLANNING: self.planning_seconds * jitter,
            READ_WAIT: math.ceil(rows / READ_BATCH_ROWS) * self.read_call_seconds * jitter,
            DECODE_ROWS: rows * self.decode_row_seconds * jitter,
            TRANSFORM: rows * self.transform_row_seconds * (1 + rows / self.gc_knee_rows) * jitter,
            SPARK_OTHER: self.trigger_seconds * jitter + stall,
        }
        return seconds, stall

    def peak(self, rows: float) -> float:
        """The batch's peak memory at `rows` per partition."""
        return self.memory_base + rows * self.memory_per_row * (1 + rows / self.memory_knee_rows)

    def safe_rows(self, share: float) -> int:
        """The most rows per partition whose peak stays within `share` of the limit."""
        low, high = 0, 1 << 40
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if self.peak(middle) <= share * self.memory_limit else (low, middle)
        return low

    def ideal_rows(self) -> int:
        """The most rows per partition whose noiseless batch meets the target (what the best fixed cap nears)."""
        low, high = 1, 1 << 40
        while high - low > 1:
            middle = (low + high) // 2
            fits = sum(replace(self, noise=0.0, stall_probability=0.0).phases(middle, random.Random(0))[0].values())
            low, high = (middle, high) if fits <= TARGET_SHARE * TRIGGER else (low, middle)
        return low


#: The world of scenarios 2-4 with memory to spare (the time target binds), and one whose memory binds first.
ROOMY = World()
TIGHT = replace(World(), memory_limit=1.6e9)


@dataclass
class Simulated:
    """A query under a processing-time trigger in `world`, tuned (`check`) or at a fixed cap."""

    cluster: Cluster
    document: str
    check: AutotuneCheck | None
    recorder: Recorder
    world: World
    rate: float  # rows per second per partition
    backlog: float  # rows per partition
    noise: random.Random
    now: float = 0.0
    batch_id: int = 0
    over_memory: int = 0
    phases: tuple[BatchPhases, ...] = ()

    def planned_rows(self) -> int:
        """Rows per partition of the next batch: the row cap and the byte cap in force, the backlog."""
        tuning = read_tuning(self.cluster, self.document)
        rows, byte_cap = max_rows_in_force(tuning, None), max_bytes_in_force(tuning, None)
        if byte_cap is not None:
            rows = min(rows or byte_cap, max(1, byte_cap // ROW_BYTES))
        return int(self.backlog if rows is None else min(rows, self.backlog))

    def cap(self) -> int | None:
        return max_rows_in_force(read_tuning(self.cluster, self.document), None)

    def batch(self) -> tuple[int, float, bool]:
        """Plan (reading the caps in force), run, then let the tuner see the batch. Returns (rows, seconds, whether
        it met the target leaving its stall aside: a stall is not the cap's doing)."""
        rows = self.planned_rows()
        seconds_by_phase, stall = self.world.phases(rows, self.noise)
        seconds = sum(seconds_by_phase.values())
        self.over_memory += self.world.peak(rows) > self.world.memory_limit
        start = self.now
        self.now = start + max(TRIGGER, seconds)  # an overrunning batch is followed at once (Spark's executor)
        self.backlog += self.rate * (self.now - start) - rows
        summary = BatchSummary(self.batch_id, rows * PARTITIONS, rows, seconds,
                               {"addBatch": seconds - seconds_by_phase[PLANNING]})
        self.phases = (*self.phases[-(RECENT_BATCHES - 1):],
                       BatchPhases(self.batch_id, seconds, {p: seconds_by_phase.get(p, 0.0) for p in PHASES}, seconds))
        status = self.recorder.status.get("sim")
        recent = (*(status.recent_batches if status else ())[-(RECENT_BATCHES - 1):], summary)
        self.recorder.status.update("sim", trigger_interval_seconds=TRIGGER, recent_batches=recent,
                                    backlog_rows=int(self.backlog * PARTITIONS), phases=shares_of(self.phases))
        self.batch_id += 1
        if self.check is not None:
            self.check.run()
        return rows, seconds, seconds - stall <= TARGET_SHARE * TRIGGER * (1 + 2 * self.world.noise)


class MemoryStore(StatusStore):
    """A status store whose query carries the OOM check's verdict for its next batch, judged on the world's memory
    (a stand-in for the OOM check: the simulation has no Spark UI to measure): the risk of the batch the caps in
    force plan, and the safe row and byte caps at the OOM risk target."""

    def __init__(self, world: World, planned: Callable[[], int]) -> None:
        super().__init__()
        self.world, self.planned = world, planned

    def get(self, name: str) -> QueryStatus | None:
        status = super().get(name)
        if status is None:
            return None
        rows = self.planned()
        risk = self.world.peak(rows) / self.world.memory_limit
        safe = self.world.safe_rows(OOM_RISK_TARGET)
        return replace(status, oom=OomVerdict(risk, 0.99, float(risk >= 1), rows * ROW_BYTES * PARTITIONS, safe,
                                              safe_max_bytes_per_partition=safe * ROW_BYTES))


def config(uri: str, root: str) -> OpsdConfig:
    return OpsdConfig.model_validate({"cluster": uri, "pipelines": [{
        "name": "sim", "source": {"path": f"{root}/q", "options": {"consumer_path": f"{root}/c"}},
        "sink": {"format": "console"}, "trigger": {"processing_time": f"{TRIGGER:g}s"},
        "autotune": {"target_share": TARGET_SHARE}}]})


def simulated(cluster: Cluster, root: str, *, tuned: bool, cap: int | None, rate: float, backlog: float,
              seed: int, world: World = ROOMY, memory_known: bool = False) -> Simulated:
    cfg = config(cluster.uri, root)
    document = cfg.pipelines[0].source_tuning_path()
    if cap is not None:
        write_tuning(cluster, document, max_rows_per_partition=cap)
    holder: list[Simulated] = []
    store = MemoryStore(world, lambda: holder[0].planned_rows()) if memory_known else StatusStore()
    recorder = Recorder(Metrics(CollectorRegistry()), store)
    check = AutotuneCheck(recorder, PositionsCollector(cluster.uri), targets_for(cfg)) if tuned else None
    holder.append(Simulated(cluster, document, check, recorder, world, rate, backlog, random.Random(seed)))
    if check is not None:  # as the runner does before a start: the query's status, the OOM verdict, the tuner
        recorder.status.update("sim", trigger_interval_seconds=TRIGGER, backlog_rows=int(backlog * PARTITIONS))
        check.run()
    return holder[0]


def drain_seconds(sim: Simulated, limit: int = 2000) -> tuple[float, bool]:
    """Time until the backlog is gone (one trigger's input left), and whether every batch met the target."""
    within = True
    for _ in range(limit):
        _, _, met = sim.batch()
        within = within and met
        if sim.backlog <= sim.rate * TRIGGER * 1.01:
            return sim.now, within
    return float("inf"), within


def scenario_drain(cluster: Cluster, fresh: Callable[[], str]) -> dict[str, Any]:
    """Drain a backlog from a cap 10x too small and 10x too large against the best fixed cap of a sweep (the
    shortest drain whose batches all met the target and stayed within the OOM risk target of the world's memory):
    with the OOM check's verdict (memory to spare), without it, and with memory that binds before time does."""
    found: dict[str, Any] = {}
    for label, world, known in (("", ROOMY, True), ("_no_oom_check", ROOMY, False), ("_memory_bound", TIGHT, True)):
        ideal = min(world.ideal_rows(), world.safe_rows(OOM_RISK_TARGET))
        rate = 0.05 * ideal / TRIGGER
        sweep = {}
        for cap in (int(ideal * f) for f in (0.25, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0, 1.05, 1.2)):
            sim = simulated(cluster, fresh(), tuned=False, cap=cap, rate=rate, backlog=BACKLOG_ROWS, seed=2,
                            world=world)
            seconds, within = drain_seconds(sim)
            sweep[cap] = (seconds, within and world.peak(cap) <= OOM_RISK_TARGET * world.memory_limit)
        feasible = {c: s for c, (s, ok) in sweep.items() if ok}
        best_cap = min(feasible, key=feasible.get)
        tuned, over_memory = {}, 0
        for name, start in (("too_small", ideal // 10), ("too_large", ideal * 10)):
            sim = simulated(cluster, fresh(), tuned=True, cap=start, rate=rate, backlog=BACKLOG_ROWS, seed=2,
                            world=world, memory_known=known)
            tuned[name] = drain_seconds(sim)[0]
            over_memory += sim.over_memory
        ratios = {k: v / feasible[best_cap] for k, v in tuned.items()}
        found.update({f"drain_ratio{label}": max(ratios.values()), f"drain_ratio{label}_by_start": ratios,
                      f"best_fixed_cap{label}": best_cap, f"best_fixed_seconds{label}": feasible[best_cap],
                      f"drain_tuned_seconds{label}": tuned, f"over_memory_batches{label}": over_memory})
    return found


def scenario_step(cluster: Cluster, fresh: Callable[[], str]) -> dict[str, Any]:
    """A 10x rate step from a settled state: batches until every later batch is settled, with the OOM check's
    verdict and without it (the risk unknown)."""
    found: dict[str, Any] = {}
    ideal = ROOMY.ideal_rows()
    for label, known in (("", True), ("_no_oom_check", False)):
        sim = simulated(cluster, fresh(), tuned=True, cap=int(ideal * 5), rate=0.12 * ideal / TRIGGER, backlog=0,
                        seed=3, memory_known=known)
        for _ in range(30):
            sim.batch()
        sim.rate *= 10
        settled = []
        for _ in range(40):
            waiting = sim.backlog
            rows, _, met = sim.batch()
            settled.append(met and rows >= min(waiting, SETTLED_SHARE * ideal))
        late = [i for i, ok in enumerate(settled) if not ok]
        found.update({f"settle_batches{label}": (late[-1] + 1) if late else 0, f"cap_after_step{label}": sim.cap()})
    return found


def scenario_steady(cluster: Cluster, fresh: Callable[[], str]) -> dict[str, Any]:
    ideal = ROOMY.ideal_rows()
    sim = simulated(cluster, fresh(), tuned=True, cap=None, rate=0.5 * ideal / TRIGGER, backlog=BACKLOG_ROWS,
                    seed=4)
    caps = []
    for _ in range(300):
        sim.batch()
        caps.append(sim.cap())
    changes = sum(1 for a, b in itertools.pairwise(caps[50:]) if a != b)
    return {"changes_per_100": changes * 100 / (len(caps) - 51), "final_cap": caps[-1]}


class SlowProxy:
    """A simulated remote proxy in front of the embedded cluster: an insert call costs a fixed latency plus a
    per-row cost (slept) that grows past `PROXY_BEST_CALL_ROWS` (an oversized call is buffered and throttled: x(1 +
    `PROXY_OVERSIZE_PENALTY` x the excess over that size)), and is not stored (so that the embedded cluster's own
    insert time, and the machine's load on it, do not blur the comparison); the largest call is remembered.
    Everything else reaches the cluster."""

    def __init__(self, inner: Cluster) -> None:
        self.inner = inner
        self.max_call_rows = 0

    @staticmethod
    def call_seconds(rows: int) -> float:
        oversize = max(0, rows - PROXY_BEST_CALL_ROWS) / PROXY_BEST_CALL_ROWS
        return CALL_SECONDS + ROW_SECONDS * rows * (1 + PROXY_OVERSIZE_PENALTY * oversize)

    def insert_rows(self, path: str, rows: Any) -> None:
        n = len(rows) if isinstance(rows, list) else rows.num_rows
        self.max_call_rows = max(self.max_call_rows, n)
        time.sleep(self.call_seconds(n))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __enter__(self) -> SlowProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def sink_run(cluster: Cluster, root: str, *, tuned: bool) -> tuple[float, int]:
    """rows/s over SINK_BATCHES batches through the sink's real write path, and the largest insert call."""
    cfg = OpsdConfig.model_validate({"cluster": cluster.uri, "pipelines": [{
        "name": "sink", "source": {"path": f"{root}/q", "options": {"consumer_path": f"{root}/c"}},
        "sink": {"format": "yt", "path": f"{root}/out"}, "autotune": {"mode": "apply" if tuned else "off"}}]})
    document = cfg.pipelines[0].sink_tuning_path()
    cluster.create("table", f"{root}/out", recursive=True, attributes={
        "dynamic": True, "schema": [{"name": "data", "type": "string"}]})
    options = SinkOptions.parse({"path": f"{root}/out", "cluster": cluster.uri, "tuning_path": document}, {})
    plan = sink.plan_sink(options, T.StructType().add("data", "string"), overwrite=False)
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    check = AutotuneCheck(recorder, PositionsCollector(cluster.uri), [t for t in targets_for(cfg)])
    proxy = SlowProxy(cluster)
    table = pa.table({"data": pa.array(["x" * 100] * SINK_TASK_ROWS)})
    elapsed = 0.0
    with mock.patch.object(sink, "connect", lambda uri: proxy):
        for batch_id in range(SINK_BATCHES):
            started = time.perf_counter()
            parts = [sink.write_rows(plan, iter(table.to_batches())) for _ in range(SINK_TASKS)]
            elapsed += time.perf_counter() - started
            sink.YtStreamWriter(plan).commit(parts, batch_id)
            if tuned:
                check.run()
    return SINK_BATCHES * SINK_TASKS * SINK_TASK_ROWS / elapsed, proxy.max_call_rows


def scenario_sink(cluster: Cluster, fresh: Callable[[], str]) -> dict[str, Any]:
    default, default_max = sink_run(cluster, fresh(), tuned=False)
    tuned, tuned_max = sink_run(cluster, fresh(), tuned=True)
    best = max(range(1000, MAX_ROWS_PER_TABLET_TRANSACTION + 1, 1000), key=lambda n: n / SlowProxy.call_seconds(n))
    per_call = {n: n / SlowProxy.call_seconds(n) for n in (best, DEFAULT_DYN_BATCH_SIZE)}
    return {"default_rows_per_s": default, "tuned_rows_per_s": tuned, "rows_ratio": tuned / default,
            "best_call_rows": best, "best_call_ratio": per_call[best] / per_call[DEFAULT_DYN_BATCH_SIZE],
            "max_call_rows": max(default_max, tuned_max)}


@contextmanager
def embedded() -> Any:
    with tempfile.TemporaryDirectory(prefix="bench-autotune-") as root, connect(f"local://{root}") as cluster:
        yield cluster


def scenario_memory(*flags: str) -> dict[str, Any]:
    """Scenario 1 (6 with `--width`) in a child process (its own 512m drivers): see `bench.autotune_memory`."""
    done = subprocess.run([sys.executable, "-m", "bench.autotune_memory", *flags], capture_output=True, text=True,
                          timeout=3600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"memory_error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def main() -> None:
    configure_logging(level="WARNING", json_lines=True)
    counter = iter(range(10**6))
    with embedded() as cluster:
        def fresh() -> str:
            return f"//bench/s{next(counter)}"

        drain = scenario_drain(cluster, fresh)
        step = scenario_step(cluster, fresh)
        steady = scenario_steady(cluster, fresh)
        writes = scenario_sink(cluster, fresh)
    memory = {} if "--no-spark" in sys.argv else scenario_memory()
    width = {} if "--no-spark" in sys.argv else scenario_memory("--width")
    print(f"{'scenario':58} {'value':>14} {'goal':>10}")
    if memory:
        for key in ("uncapped_oom_failures", "uncapped_drained", "oom_failures", "tuned_drained",
                    "tuned_driver_died_of_oom"):
            print(f"{'1 (real Spark) ' + key:58} {memory.get(key, memory.get('memory_error', '-'))!s:>14}")
    if width:
        for key in ("width_rows_only_oom_failures", "width_byte_cap_oom_failures", "width_byte_cap_drained",
                    "width_tuned_oom_failures", "width_tuned_drained"):
            goal = "0" if key in ("width_byte_cap_oom_failures", "width_tuned_oom_failures") else ""
            print(f"{'6 (real Spark) ' + key:58} {width.get(key, width.get('memory_error', '-'))!s:>14} {goal:>10}")
    for label, what, known in (("", "OOM check on", True), ("_no_oom_check", "risk unknown", False),
                               ("_memory_bound", "memory binds", True)):
        print(f"{'2 (simulated, ' + what + ') best fixed cap, drain (s)':58} "
              f"{drain['best_fixed_seconds' + label]:>14.0f}")
        for name, seconds in drain["drain_tuned_seconds" + label].items():
            print(f"{'2 (simulated, ' + what + ') tuner, cap ' + name.replace('_', ' ') + ' (s)':58} {seconds:>14.0f}")
        print(f"{'2 (simulated) drain_ratio' + label + ' (worse start)':58} {drain['drain_ratio' + label]:>14.3f} "
              f"{'<= 1.15':>10}")
        over = drain["over_memory_batches" + label]
        print(f"{'2 (simulated) over_memory_batches' + label + ', tuned':58} {over:>14} {'0' if known else '':>10}")
    print(f"{'3 (simulated) settle_batches after a 10x rate step':58} {step['settle_batches']:>14} {'<= 10':>10}")
    print(f"{'3 (simulated) settle_batches_no_oom_check (risk unknown)':58} {step['settle_batches_no_oom_check']:>14}")
    print(f"{'4 (simulated) changes_per_100 at a steady rate':58} {steady['changes_per_100']:>14.2f} {'<= 2':>10}")
    print(f"{'5 (sink path, simulated proxy) default 50000 (rows/s)':58} {writes['default_rows_per_s']:>14,.0f}")
    print(f"{'5 (sink path, simulated proxy) tuned (rows/s)':58} {writes['tuned_rows_per_s']:>14,.0f}")
    print(f"{'5 rows_ratio tuned / default':58} {writes['rows_ratio']:>14.3f} {'>= 1.0':>10}")
    print(f"{'5 best_call_ratio, the proxy best call / default':58} {writes['best_call_ratio']:>14.3f}")
    print(f"{'5 largest insert call (rows)':58} {writes['max_call_rows']:>14,} {'<= 100000':>10}")
    print(json.dumps({
        "bench": "autotune", "simulated": ["drain", "settle", "steady", "proxy"],
        **{k: memory[k] for k in memory}, **{k: width[k] for k in width if k != "memory_error"},
        **({"width_error": width["memory_error"]} if "memory_error" in width else {}),
        **drain, "drain_goal": DRAIN_GOAL, "over_memory_goal": OVER_MEMORY_GOAL,
        **step, "settle_goal": SETTLE_GOAL,
        "changes_per_100": steady["changes_per_100"], "changes_goal": CHANGES_GOAL,
        "rows_ratio": writes["rows_ratio"], "rows_goal": ROWS_GOAL, "best_call_ratio": writes["best_call_ratio"],
        "max_call_rows": writes["max_call_rows"], "transaction_limit": MAX_ROWS_PER_TABLET_TRANSACTION,
    }))


if __name__ == "__main__":
    main()
