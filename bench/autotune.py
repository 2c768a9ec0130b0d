"""The auto-tuner against fixed values: drain time, settling after a rate step, changes at a steady rate, rows per
insert call against a slow proxy, and a workload that dies of memory uncapped.

Scenarios 2-4 drive the real `AutotuneCheck` (collect from a real status store and the embedded cluster's tuning
document, evaluate, decide, apply with `write_tuning`) against a SIMULATED query: a processing-time trigger of
`TRIGGER` seconds, `PARTITIONS` partitions, batch duration = `FIXED_SECONDS` + `SECONDS_PER_ROW` x rows of the
largest partition, times a seeded noise of +-`NOISE`; a batch starts at the next tick after the previous one ends
and reads min(cap, available) rows per partition. The cap a batch reads is the one in force when it is planned,
i.e. right after the previous batch ends and BEFORE the tuner sees that batch (the one-batch delay). The duration
model's constants come from this machine's measured facts (~0.35 s per micro-batch outside addBatch, ~100k rows/s
per partition on 2 cores); they are not fitted to anything the tuner does.

1. Memory (real Spark, a child driver with `spark.driver.memory=512m`, `foreachBatch` + `toPandas()`, 1 KB rows):
   uncapped, then with the tuner (mode apply, defaults) starting uncapped: `oom_failures` of each.
2. Drain of a backlog of `BACKLOG_ROWS` per partition with the tuner from a cap 100x too small and 10x too large,
   against the best fixed cap of a sweep (the cap with the shortest drain whose batches all meet the target):
   `drain_ratio` (tuner / best fixed, the worse start; goal <= 1.15, 1.05) as opsd runs it, with the OOM check's
   verdict on the status (a stand-in reporting a low risk: the simulation has no memory to measure), and
   `drain_ratio_no_oom_check` with the risk unknown (the OOM check off, e.g. `spark.ui.enabled=false`), where the
   tuner raises by at most `max_step_up_unknown_risk` per step.
3. A 10x step of the input rate from a settled state: `settle_batches`, batches after the step until every batch
   is within the target (goal <= 10).
4. A steady input rate, 300 batches: knob changes per 100 batches after the first 50 (`changes_per_100`, goal
   <= 2).
5. `dynBatchSize`: the real sink path (`write_rows`' chunking, its write statistics, the commit that stores them,
   the tuner's apply) on the embedded cluster behind a simulated proxy whose insert call costs `CALL_SECONDS` +
   `ROW_SECONDS` x rows (slept, rows not stored); 10 batches of 2 tasks x 400k rows, tuned (from 50000) against
   the default 50000: `rows_ratio` (goal >= 1.0) and `max_call_rows` (<= 100000).

6. Row width (real Spark, `bench.autotune_memory --width`, skipped with `--no-spark`): the workload of scenario 1
   over rows whose width grows 10x mid-stream (100 bytes, then 1 KB, 200k of each per partition, a queue with
   `$cumulative_data_weight`), run with a row cap that is safe for the narrow rows alone, with that row cap and a
   byte cap, and tuned (mode apply) from the row cap alone: `width_*_oom_failures` (goal 0 with the byte cap).

Run: `python -m bench.autotune` (add `--no-spark` to skip scenarios 1 and 6). Last line: one JSON object.
"""

from __future__ import annotations

import itertools
import json
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
from opsd.observe.progress import BatchSummary
from opsd.observe.recorder import Recorder
from opsd.observe.status import RECENT_BATCHES, QueryStatus, StatusStore
from opsd.results.oom import OomVerdict
from opsd.telemetry.logs import configure_logging
from opsd.telemetry.metrics import Metrics
from streaming_core import sink
from streaming_core.cluster import Cluster, connect
from streaming_core.cluster.base import MAX_ROWS_PER_TABLET_TRANSACTION
from streaming_core.options import SinkOptions
from streaming_core.tuning import max_rows_in_force, read_tuning, write_tuning

TRIGGER, PARTITIONS = 10.0, 4
FIXED_SECONDS, SECONDS_PER_ROW, NOISE = 0.35, 1e-5, 0.05
BACKLOG_ROWS = 30_000_000
TARGET_SHARE = 0.7
CALL_SECONDS, ROW_SECONDS = 0.1, 1e-6
SINK_BATCHES, SINK_TASKS, SINK_TASK_ROWS = 10, 2, 400_000
#: The OOM risk the stand-in for the OOM check reports in the "known risk" runs of scenario 2.
LOW_RISK = 0.1
DRAIN_GOAL, SETTLE_GOAL, CHANGES_GOAL, ROWS_GOAL = 1.15, 10, 2.0, 1.0


@dataclass
class Simulated:
    """A query under a processing-time trigger, tuned (`check`) or at a fixed cap."""

    cluster: Cluster
    document: str
    check: AutotuneCheck | None
    recorder: Recorder
    rate: float  # rows per second per partition
    backlog: float  # rows per partition
    noise: random.Random
    now: float = 0.0
    batch_id: int = 0

    def cap(self) -> int | None:
        return max_rows_in_force(read_tuning(self.cluster, self.document), None)

    def batch(self) -> tuple[int, float, int | None]:
        """Plan (reading the cap in force), run, then let the tuner see the batch. Returns (rows, seconds, cap)."""
        cap = self.cap()
        rows = int(self.backlog if cap is None else min(cap, self.backlog))
        seconds = (FIXED_SECONDS + SECONDS_PER_ROW * rows) * (1 + self.noise.uniform(-NOISE, NOISE))
        start = self.now
        self.now = start + max(TRIGGER, seconds)  # an overrunning batch is followed at once (Spark's executor)
        self.backlog += self.rate * (self.now - start) - rows
        summary = BatchSummary(self.batch_id, rows * PARTITIONS, rows, seconds, {"addBatch": seconds - FIXED_SECONDS})
        status = self.recorder.status.get("sim")
        recent = (*(status.recent_batches if status else ())[-(RECENT_BATCHES - 1):], summary)
        self.recorder.status.update("sim", trigger_interval_seconds=TRIGGER, recent_batches=recent,
                                    backlog_rows=int(self.backlog * PARTITIONS))
        self.batch_id += 1
        if self.check is not None:
            self.check.run()
        return rows, seconds, cap


class RiskStore(StatusStore):
    """A status store whose queries carry a fixed OOM risk: a stand-in for the OOM check, as the simulation has no
    Spark UI to read."""

    def __init__(self, risk: float) -> None:
        super().__init__()
        self.risk = risk

    def get(self, name: str) -> QueryStatus | None:
        status = super().get(name)
        return None if status is None else replace(status, oom=OomVerdict(self.risk, 0.95, self.risk, 0.0, None))


def config(uri: str, root: str) -> OpsdConfig:
    return OpsdConfig.model_validate({"cluster": uri, "pipelines": [{
        "name": "sim", "source": {"path": f"{root}/q", "options": {"consumer_path": f"{root}/c"}},
        "sink": {"format": "console"}, "trigger": {"processing_time": f"{TRIGGER:g}s"},
        "autotune": {"target_share": TARGET_SHARE}}]})


def simulated(cluster: Cluster, root: str, *, tuned: bool, cap: int | None, rate: float, backlog: float,
              seed: int, risk: float | None = None) -> Simulated:
    cfg = config(cluster.uri, root)
    document = cfg.pipelines[0].source_tuning_path()
    if cap is not None:
        write_tuning(cluster, document, max_rows_per_partition=cap)
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore() if risk is None else RiskStore(risk))
    check = AutotuneCheck(recorder, PositionsCollector(cluster.uri), targets_for(cfg)) if tuned else None
    return Simulated(cluster, document, check, recorder, rate, backlog, random.Random(seed))


def within_target(seconds: float) -> bool:
    """A batch meets the target up to the model's noise (a batch at the fixed point is over it half the time)."""
    return seconds <= TARGET_SHARE * TRIGGER * (1 + NOISE)


def drain_seconds(sim: Simulated, limit: int = 2000) -> tuple[float, bool]:
    """Time until the backlog is gone (one trigger's input left), and whether every batch met the target."""
    within = True
    for _ in range(limit):
        _, seconds, _ = sim.batch()
        within = within and within_target(seconds)
        if sim.backlog <= sim.rate * TRIGGER * 1.01:
            return sim.now, within
    return float("inf"), within


def scenario_drain(cluster: Cluster, fresh: Callable[[], str]) -> dict[str, Any]:
    ideal = (TARGET_SHARE * TRIGGER - FIXED_SECONDS) / SECONDS_PER_ROW
    rate = 0.05 * ideal / TRIGGER
    sweep = {}
    for cap in (int(ideal * f) for f in (0.25, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0, 1.05, 1.2)):
        seconds, within = drain_seconds(simulated(cluster, fresh(), tuned=False, cap=cap, rate=rate,
                                                  backlog=BACKLOG_ROWS, seed=2))
        sweep[cap] = (seconds, within)
    feasible = {c: s for c, (s, ok) in sweep.items() if ok}
    best_cap = min(feasible, key=feasible.get)
    best = feasible[best_cap]
    tuned = {}
    for risk in (None, LOW_RISK):
        for name, start in (("too_small", int(ideal / 10)), ("too_large", int(ideal * 10))):
            key = f"{name}_{'unknown' if risk is None else 'low'}_risk"
            tuned[key] = drain_seconds(simulated(cluster, fresh(), tuned=True, cap=start, rate=rate,
                                                 backlog=BACKLOG_ROWS, seed=2, risk=risk))[0]
    ratios = {k: v / best for k, v in tuned.items()}
    return {"best_fixed_cap": best_cap, "best_fixed_seconds": best, "tuned_seconds": tuned,
            "drain_ratio": max(v for k, v in ratios.items() if "low" in k),
            "drain_ratio_no_oom_check": max(v for k, v in ratios.items() if "unknown" in k),
            "drain_ratio_by_start": ratios}


def settle(sim: Simulated, batches: int) -> list[float]:
    return [sim.batch()[1] for _ in range(batches)]


def scenario_step(cluster: Cluster, fresh: Callable[[], str]) -> dict[str, Any]:
    ideal = (TARGET_SHARE * TRIGGER - FIXED_SECONDS) / SECONDS_PER_ROW
    sim = simulated(cluster, fresh(), tuned=True, cap=int(ideal * 5), rate=0.12 * ideal / TRIGGER, backlog=0,
                    seed=3)
    settle(sim, 30)
    sim.rate *= 10
    after = settle(sim, 40)
    late = [i for i, s in enumerate(after) if not within_target(s)]
    return {"settle_batches": (late[-1] + 1) if late else 0, "cap_after_step": sim.cap()}


def scenario_steady(cluster: Cluster, fresh: Callable[[], str]) -> dict[str, Any]:
    ideal = (TARGET_SHARE * TRIGGER - FIXED_SECONDS) / SECONDS_PER_ROW
    sim = simulated(cluster, fresh(), tuned=True, cap=None, rate=0.5 * ideal / TRIGGER, backlog=BACKLOG_ROWS,
                    seed=4)
    caps = [sim.batch()[2] for _ in range(300)]
    changes = sum(1 for a, b in itertools.pairwise(caps[50:]) if a != b)
    return {"changes_per_100": changes * 100 / (len(caps) - 51), "final_cap": caps[-1]}


class SlowProxy:
    """A simulated remote proxy in front of the embedded cluster: an insert call costs a fixed latency plus a
    per-row cost (slept) and is not stored (so that the embedded cluster's own insert time, and the machine's load
    on it, do not blur the comparison); the largest call is remembered. Everything else reaches the cluster."""

    def __init__(self, inner: Cluster) -> None:
        self.inner = inner
        self.max_call_rows = 0

    def insert_rows(self, path: str, rows: Any) -> None:
        n = len(rows) if isinstance(rows, list) else rows.num_rows
        self.max_call_rows = max(self.max_call_rows, n)
        time.sleep(CALL_SECONDS + ROW_SECONDS * n)

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
    return {"default_rows_per_s": default, "tuned_rows_per_s": tuned, "rows_ratio": tuned / default,
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
    print(f"{'2 (simulated) best fixed cap of the sweep, drain (s)':58} {drain['best_fixed_seconds']:>14.0f}")
    for name, seconds in drain["tuned_seconds"].items():
        print(f"{'2 (simulated) tuner, cap ' + name.replace('_', ' ') + ', drain (s)':58} {seconds:>14.0f}")
    print(f"{'2 (simulated) drain_ratio, OOM check on (worse start)':58} {drain['drain_ratio']:>14.3f} {'<= 1.15':>10}")
    print(f"{'2 (simulated) drain_ratio_no_oom_check, risk unknown':58} {drain['drain_ratio_no_oom_check']:>14.3f} "
          f"{'<= 1.15':>10}")
    print(f"{'3 (simulated) settle_batches after a 10x rate step':58} {step['settle_batches']:>14} {'<= 10':>10}")
    print(f"{'4 (simulated) changes_per_100 at a steady rate':58} {steady['changes_per_100']:>14.2f} {'<= 2':>10}")
    print(f"{'5 (sink path, simulated proxy) default 50000 (rows/s)':58} {writes['default_rows_per_s']:>14,.0f}")
    print(f"{'5 (sink path, simulated proxy) tuned (rows/s)':58} {writes['tuned_rows_per_s']:>14,.0f}")
    print(f"{'5 rows_ratio tuned / default':58} {writes['rows_ratio']:>14.3f} {'>= 1.0':>10}")
    print(f"{'5 largest insert call (rows)':58} {writes['max_call_rows']:>14,} {'<= 100000':>10}")
    print(json.dumps({
        "bench": "autotune", "simulated": ["drain", "settle", "steady"],
        **{k: memory[k] for k in memory}, **{k: width[k] for k in width if k != "memory_error"},
        **({"width_error": width["memory_error"]} if "memory_error" in width else {}),
        "drain_ratio": drain["drain_ratio"], "drain_ratio_no_oom_check": drain["drain_ratio_no_oom_check"],
        "drain_ratio_by_start": drain["drain_ratio_by_start"],
        "drain_goal": DRAIN_GOAL, "best_fixed_cap": drain["best_fixed_cap"],
        "settle_batches": step["settle_batches"], "settle_goal": SETTLE_GOAL,
        "changes_per_100": steady["changes_per_100"], "changes_goal": CHANGES_GOAL,
        "rows_ratio": writes["rows_ratio"], "rows_goal": ROWS_GOAL, "max_call_rows": writes["max_call_rows"],
        "transaction_limit": MAX_ROWS_PER_TABLET_TRANSACTION,
    }))


if __name__ == "__main__":
    main()
