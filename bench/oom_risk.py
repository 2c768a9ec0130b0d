"""OOM risk validated on real out-of-memory runs: did opsd predict, before a batch ran, that it would die of memory?

A matrix of workload shapes (an operator x a row width), each run for real in its own Spark session (`local[2]`,
`spark.driver.memory=512m`, `-XX:MaxDirectMemorySize=128m`, `spark.executor.pyspark.memory=1g`: small limits make
out-of-memory runs fast), as one micro-batch per size read from a 2-tablet `yt` queue, sizes growing like the
batches of one query (`SIZES_MIB` of Arrow bytes, doubling from 12 MiB: not aligned with the limits' powers of two,
so that no shape's last completed batch sits at its limit by construction), until the first run that fails.

Each run is measured by opsd's own collect step (`opsd.checks.oom.collect`: the stages' REST facts and the memory
sampler's window, the way the OOM check measures a batch). Before each run, opsd's model (`opsd.checks.oom.evaluate`,
default settings: nothing in it is fitted to this matrix) judges the batch from the runs of the same shape before it
(the first from the prior alone) and the pools' levels just before the run; after it, what was measured, or the
memory failure, is what the model learns.

Shapes (`SHAPES`), each built to fill one pool: the JVM heap (`to_pandas`: the batch collected through the driver;
`collect_list`: one group's values in an aggregation buffer), Python workers (`pandas_udf`: the batch as one group of
a grouped pandas UDF; `map_in_pandas`: a partition concatenated into one DataFrame and deduplicated), direct memory
(`arrow_concat`: `mapInArrow` returning a partition as one Arrow batch; `apply_in_arrow`: one group returned as one
table), and two whose memory should stay flat or saturate (`sort`: spills; `passthrough`: the `yt` sink, chunked).
Rows of 100 and 1000 bytes. The split by shape is fixed here and printed: the model's defaults (the slope prior's
spread, the prior slopes' scale, the prior odds that a pool levels off) were chosen on the `tune` half
only (`--sweep` over recordings of that half, `SWEEP`: the defaults in `ModelSettings` are its first row, by recall,
then false alarms, then the fewest values changed, then peak error; its output is kept in `SWEEP_OUTPUT`); the
`held_out` half reports how the model does on shapes its defaults were not chosen on. Every measured matrix is kept
under `bench/recordings/` (one compact JSON line per run), so that any figure can be judged again (`--replay`).

Figures, for the whole matrix and each half: `recall` = failed runs predicted at risk >= 1.0 beforehand / failed runs
(out of memory, and also runs that timed out or died unrecognised: a failure not seen coming is a miss whatever
killed it); `false_alarms` = completed runs predicted >= 1.0 / completed runs; `peak_error` = mean relative
error of the expected peak against the measured one, in the run's binding pool (the highest measured peak over its
limit), for completed runs with at least one earlier observation; `prior_peak_error` the same for the runs judged by
the prior alone. Goals: recall 1.0, false alarms <= 0.1, peak error <= 0.25, held-out and whole.

What it cannot show: other machines' memory layouts (one JVM in local mode: the driver's heap is the executors'),
clusters where Python workers and direct memory are measured by Spark's executor metrics rather than the sampler,
batch sizes between the doublings, and a query's history longer than six batches; shapes outside the eight here are
judged only through the held-out half.

Run: `python -m bench.oom_risk` (~6 min on 2 cores; last line: one JSON object; the recording is written under
`bench/recordings/`); `--half tune` runs one half; `--record FILE` keeps the raw runs there instead, `--replay FILE`
judges recorded runs again without Spark (seconds), `--sweep FILE...` chooses defaults on recordings (their tune half
only).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from opsd.checks.oom.check import WINDOW_SLACK_SECONDS
from opsd.checks.oom.collect import (
    SparkRest,
    batch_usage,
    execution_region,
    pool_limits,
    sample_bytes_per_row,
    stage_facts,
)
from opsd.checks.oom.evaluate import (
    DIRECT,
    DRIVER_RESULT,
    HEAP,
    POOLS,
    PYTHON_WORKER,
    BatchUsage,
    ModelSettings,
    Observation,
    PoolUsage,
    evaluate,
    observations_of,
    planned_batch,
)
from opsd.checks.oom.sampler import MemorySampler
from opsd.config.spark import MEMORY_METRICS_CONF
from opsd.observe.failures import memory_pool
from opsd.observe.progress import PartitionOffsets
from streaming_core.cluster import Cluster, connect


@dataclass(frozen=True)
class Shape:
    """A workload shape: an operator over rows of `row_bytes`, built to fill `pool`; `held_out` from tuning."""

    workload: str
    row_bytes: int
    pool: str
    held_out: bool

    @property
    def name(self) -> str:
        return f"{self.workload}/{self.row_bytes}B"


SHAPES = (
    Shape("to_pandas", 100, "jvm_heap", held_out=False),
    Shape("pandas_udf", 1000, "python_worker", held_out=False),
    Shape("arrow_concat", 100, "direct", held_out=False),
    Shape("sort", 1000, "jvm_heap", held_out=False),
    Shape("collect_list", 1000, "jvm_heap", held_out=True),
    Shape("map_in_pandas", 100, "python_worker", held_out=True),
    Shape("apply_in_arrow", 1000, "direct", held_out=True),
    Shape("passthrough", 100, "direct", held_out=True),
)
HALVES = {"tune": False, "held_out": True}
SIZES_MIB = (12, 24, 48, 96, 192, 384)
QUICK_SIZES_MIB = (12, 48)
TABLETS = 2
CONF = {
    "spark.driver.memory": "512m",
    "spark.driver.extraJavaOptions": "-XX:MaxDirectMemorySize=128m",
    "spark.executor.pyspark.memory": "1g",
    "spark.sql.shuffle.partitions": "1",
    "spark.ui.port": "0",
    "spark.ui.showConsoleProgress": "false",
    **MEMORY_METRICS_CONF,
}
MASTER = "local[2]"
SCHEMA = [{"name": "data", "type": "string"}, {"name": "n", "type": "int64"}]
#: Seconds a run may take before it counts as hung; a shape's whole child process gets `SHAPE_TIMEOUT_SECONDS`.
RUN_TIMEOUT_SECONDS, SHAPE_TIMEOUT_SECONDS = 120, 600
#: Seconds after a batch before its facts are read: the last executor metrics arrive with a heartbeat.
SETTLE_SECONDS = 1.5
RECALL_GOAL, FALSE_ALARMS_GOAL, PEAK_ERROR_GOAL = 1.0, 0.1, 0.25
MIB = 1 << 20
#: Where every measured matrix is kept (`record`), and the sweep's output that chose the model's defaults.
RECORDINGS = Path(__file__).parent / "recordings"
SWEEP_OUTPUT = RECORDINGS / "oom_risk-sweep.txt"
#: Lines of a failure's text a recording keeps: those that can say which pool ran out (the rest is a stack).
_TELLING = ("Error", "Exception", "OutOf", "memory", "Memory", "killed", "died", "timeout", "exited")


def queue_path(row_bytes: int) -> str:
    return f"//bench/q{row_bytes}"


def fill_queue(cluster: Cluster, path: str, row_bytes: int, rows: int) -> None:
    cluster.create("table", path, recursive=True, attributes={
        "dynamic": True, "tablet_count": TABLETS, "schema": SCHEMA})
    per_tablet, step = rows // TABLETS, max(1, (16 * MIB) // row_bytes)
    for tablet in range(TABLETS):
        for lo in range(0, per_tablet, step):
            n = pa.array(range(lo, min(lo + step, per_tablet)), pa.int64())
            cluster.insert_rows(path, pa.table({"data": pa.array(["x" * row_bytes] * len(n)), "n": n}),
                                tablet_index=tablet)


def bytes_per_row(cluster: Cluster, path: str) -> float:
    """Bytes per row as the OOM check measures them (the Arrow size of the rows read)."""
    read = [PartitionOffsets(path, t, -1, 999, 999) for t in range(TABLETS)]
    per_row = sample_bytes_per_row(cluster, read)
    assert per_row is not None
    return per_row


def rows_for(mib: float, per_row: float) -> int:
    """Rows of a batch of `mib` MiB, a multiple of the tablets."""
    return int(mib * MIB / per_row) // TABLETS * TABLETS


# -- the workloads (foreachBatch functions; `passthrough` is the yt sink) ----------------------------------------

def to_pandas(df: Any, batch_id: int) -> None:
    df.toPandas()


def collect_list(df: Any, batch_id: int) -> None:
    from pyspark.sql import functions as F

    df.groupBy(F.lit(1).alias("g")).agg(F.size(F.collect_list("data")).alias("n")).collect()


def pandas_udf(df: Any, batch_id: int) -> None:
    from pyspark.sql import functions as F

    def whole_group(pdf):
        import pandas as pd
        return pd.DataFrame({"rows": [len(pdf)], "chars": [int(pdf["data"].str.len().sum())]})

    df.withColumn("g", F.lit("all")).groupBy("g").applyInPandas(whole_group, "rows long, chars long").collect()


def map_in_pandas(df: Any, batch_id: int) -> None:
    def deduplicated(batches):
        import pandas as pd
        whole = pd.concat(list(batches))
        yield pd.DataFrame({"rows": [len(whole.drop_duplicates("n"))]})

    df.mapInPandas(deduplicated, "rows long").collect()


def arrow_concat(df: Any, batch_id: int) -> None:
    def one_batch(batches):
        import pyarrow as pa
        batches = list(batches)
        if batches:
            yield pa.Table.from_batches(batches).combine_chunks().to_batches(max_chunksize=1 << 62)[0]

    df.mapInArrow(one_batch, df.schema).write.format("noop").mode("overwrite").save()


def apply_in_arrow(df: Any, batch_id: int) -> None:
    from pyspark.sql import functions as F

    def whole_group(table):
        return table.select(["data", "n"]).combine_chunks()

    (df.withColumn("g", F.lit(1)).groupBy("g").applyInArrow(whole_group, "data string, n long")
     .write.format("noop").mode("overwrite").save())


def sort(df: Any, batch_id: int) -> None:
    df.sort("data", "n").write.format("noop").mode("overwrite").save()


WORKLOADS = {f.__name__: f for f in (to_pandas, collect_list, pandas_udf, map_in_pandas, arrow_concat,
                                     apply_in_arrow, sort)}


# -- the child: one shape, one session, its sizes in order until one fails -----------------------------------------

def run_shape(shape: Shape, root: str, log_path: str, sizes: tuple[float, ...]) -> None:
    """Print one JSON line per run: its rows and bytes, the pools' levels before it, what it used or how it died."""
    from streaming_core import build_session

    uri = f"local://{root}/cluster"
    queue = queue_path(shape.row_bytes)
    with connect(uri) as cluster:
        per_row = bytes_per_row(cluster, queue)
    spark = build_session("bench-oom", master=MASTER, cluster=uri, conf=CONF)
    context = spark.sparkContext
    rest = SparkRest(context.uiWebUrl, context.applicationId)
    sampler = MemorySampler.for_spark(context).start()
    for index, mib in enumerate(sizes):
        rows = rows_for(mib, per_row)
        name = f"{shape.workload}{shape.row_bytes}_{index}"
        with connect(uri) as cluster:
            cluster.create_consumer(f"//bench/c_{name}")
            cluster.register_queue_consumer(queue, f"//bench/c_{name}")
            if shape.workload == "passthrough":
                cluster.create("table", f"//bench/out_{name}", attributes={
                    "dynamic": True, "tablet_count": 1, "schema": SCHEMA})
        time.sleep(SETTLE_SECONDS)
        idle = sampler.idle()
        log_offset = os.path.getsize(log_path)
        started = time.time()
        failure = run_batch(spark, shape, name, root, rows, log_path, log_offset)
        ended = time.time()
        time.sleep(SETTLE_SECONDS)
        start, end = started - WINDOW_SLACK_SECONDS, ended + WINDOW_SLACK_SECONDS
        try:
            usage = batch_usage(stage_facts(rest.stages(), start, end), sampler.window(start, end))
        except Exception:  # a driver gone with its batch: the failure says why
            usage = BatchUsage()
        print(json.dumps({"mib": mib, "rows": rows, "batch_bytes": rows * per_row, "idle": idle,
                          "seconds": round(ended - started, 1), "failure": failure, "usage": asdict(usage)}),
              flush=True)
        if failure:
            os._exit(0)  # a JVM that ran out of memory may hang on the way out
    sampler.stop()
    spark.stop()


def run_batch(spark: Any, shape: Shape, name: str, root: str, rows: int, log_path: str, log_offset: int
              ) -> str | None:
    """One micro-batch of `rows` (the first of a query whose next trigger is an hour away); the failure's text, if
    any: the query's exception and what the JVM logged of memory (an error in a JVM thread may hang the query)."""
    try:
        stream = (spark.readStream.format("yt").option("consumer_path", f"//bench/c_{name}")
                  .option("max_rows_per_partition", rows // TABLETS).load(queue_path(shape.row_bytes)).writeStream
                  .option("checkpointLocation", f"{root}/checkpoints/{name}").trigger(processingTime="1 hour"))
        if shape.workload == "passthrough":
            stream = stream.format("yt").option("path", f"//bench/out_{name}")
        else:
            stream = stream.foreachBatch(WORKLOADS[shape.workload])
        query = stream.start()
        deadline = time.monotonic() + RUN_TIMEOUT_SECONDS
        while query.isActive and query.lastProgress is None:
            logged = jvm_memory_errors(log_path, log_offset)
            if logged or time.monotonic() > deadline:
                return logged or f"timeout after {RUN_TIMEOUT_SECONDS} s"
            time.sleep(0.2)
        exception = query.exception()
        query.stop()
        if exception is not None:
            return f"{exception}\n{jvm_memory_errors(log_path, log_offset)}"
        return None
    except Exception:
        return f"{traceback.format_exc()}\n{jvm_memory_errors(log_path, log_offset)}"


def jvm_memory_errors(log_path: str, offset: int) -> str:
    """The lines the JVM logged since `offset` that name an out-of-memory error."""
    with open(log_path, errors="replace") as log:
        log.seek(offset)
        return "\n".join(line for line in log.read().splitlines() if "OutOf" in line and "Memory" in line)


# -- the parent: the matrix ---------------------------------------------------------------------------------------

def measure(shapes: tuple[Shape, ...], sizes: tuple[float, ...]) -> list[dict[str, Any]]:
    """Run every shape in its own child process; the raw runs, in order."""
    runs = []
    per_row: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-oom-") as root:
        with connect(f"local://{root}/cluster") as cluster:
            for width in sorted({s.row_bytes for s in shapes}):
                fill_queue(cluster, f"//bench/sample{width}", width, TABLETS * 1000)
                per_row[width] = bytes_per_row(cluster, f"//bench/sample{width}")
                fill_queue(cluster, queue_path(width), width, rows_for(max(sizes), per_row[width]) + TABLETS)
        for shape in shapes:
            started = time.perf_counter()
            for run in run_isolated(shape, root, sizes, per_row[shape.row_bytes]):
                runs.append({"shape": shape.name, **run})
            print(f"  {shape.name}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return runs


def run_isolated(shape: Shape, root: str, sizes: tuple[float, ...], per_row: float) -> list[dict[str, Any]]:
    """A shape's runs from its child; a child that died in a run (its driver killed by the error) reports that run
    with the JVM's last words."""
    log_path = Path(root) / f"{shape.workload}{shape.row_bytes}.log"
    log_path.touch()
    command = [sys.executable, "-m", "bench.oom_risk", "--child", shape.workload, str(shape.row_bytes), root,
               str(log_path), ",".join(str(s) for s in sizes)]
    with open(log_path, "a") as log:
        try:
            child = subprocess.run(command, stdout=subprocess.PIPE, stderr=log, text=True,
                                   timeout=SHAPE_TIMEOUT_SECONDS, cwd=Path(__file__).parent.parent)
            out = child.stdout
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ""
    runs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if len(runs) < len(sizes) and not (runs and runs[-1]["failure"]):
        last_words = jvm_memory_errors(str(log_path), 0) or log_path.read_text(errors="replace")[-3000:]
        mib = sizes[len(runs)]
        rows = rows_for(mib, per_row)
        runs.append({"mib": mib, "rows": rows, "batch_bytes": rows * per_row, "idle": {}, "seconds": None,
                     "failure": f"the child died: {last_words}", "usage": asdict(BatchUsage())})
    return runs


def record(raw: list[dict[str, Any]], path: Path) -> None:
    """Keep a matrix's raw runs compact, one JSON line per run: bytes rounded to whole bytes, a failure's text cut to
    the lines that tell its cause (kept whole where cutting would change which pool it names)."""
    lines = []
    for run in raw:
        failure = run["failure"]
        if failure:
            told = "\n".join(line[:300] for line in failure.splitlines() if any(t in line for t in _TELLING))[:4000]
            failure = told if memory_pool(told) == memory_pool(failure) else failure
        usage = run["usage"]
        lines.append(json.dumps({
            **run, "batch_bytes": round(run["batch_bytes"]), "failure": failure,
            "idle": {p: round(v) for p, v in run["idle"].items()},
            "usage": {**usage, "execution_bytes": round(usage["execution_bytes"]), "pools": {
                p: {**u, "peak_bytes": round(u["peak_bytes"]), "baseline_bytes": round(u["baseline_bytes"])}
                for p, u in usage["pools"].items()}}}, separators=(",", ":")))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def recorded(path: Path) -> list[dict[str, Any]]:
    """The raw runs of a recording (one JSON line per run; an older recording is one JSON list)."""
    text = path.read_text()
    return json.loads(text) if text.lstrip().startswith("[") else [json.loads(line) for line in text.splitlines()
                                                                     if line.strip()]


def judge(raw: list[dict[str, Any]], settings: ModelSettings | None = None) -> list[dict[str, Any]]:
    """Replay each shape's runs in order through the model: the verdict before each run, then what it learns."""
    settings = settings or ModelSettings()
    limits, region = pool_limits(CONF, MASTER), execution_region(CONF, MASTER)
    judged = []
    seen: dict[str, dict[str, list[Observation]]] = {}
    for run in raw:
        shape = next(s for s in SHAPES if s.name == run["shape"])
        observations = seen.setdefault(shape.name, {pool: [] for pool in POOLS})
        rows, batch_bytes = run["rows"], run["batch_bytes"]
        batch = planned_batch([PartitionOffsets("q", t, None, -1, rows // TABLETS - 1)
                               for t in range(TABLETS)], rows // TABLETS, batch_bytes / rows)
        before = evaluate(shape.name, batch, limits, observations, settings=settings, baselines=run["idle"],
                          execution_region_bytes=region)
        usage = BatchUsage({p: PoolUsage(**u) for p, u in run["usage"]["pools"].items()},
                           run["usage"]["execution_bytes"], run["usage"]["spilled"])
        pool = memory_pool(run["failure"])
        outcome = "completed" if not run["failure"] else f"oom:{pool}" if pool else "failed"
        measured = {p: u.peak_bytes for p, u in usage.pools.items() if p in limits}
        binding = max(measured, key=lambda p: measured[p] / limits[p], default=None) if outcome == "completed" else None
        predicted = {p.pool: p for p in before.pools}
        judged.append({
            "shape": shape.name, "held_out": shape.held_out, "mib": run["mib"], "rows": rows, "risk": before.risk,
            "exceed_probability": before.exceed_probability, "outcome": outcome, "pool": binding or pool,
            "predicted": predicted[binding].predicted_peak_bytes if binding else None,
            "bound": predicted[(binding or pool)].peak_bound_bytes if (binding or pool) in predicted else None,
            "observed": measured.get(binding), "limit": limits.get(binding or pool),
            "fitted": any(observations.values()), "seconds": run["seconds"]})
        step = len([r for r in judged if r["shape"] == shape.name]) - 1
        if outcome == "completed":
            for p, o in observations_of(step, batch_bytes, usage).items():
                observations[p].append(o)
        elif pool in observations:
            observations[pool].append(Observation(step, batch_bytes, 0.0, failed=True,
                                                  baseline_bytes=predicted[pool].baseline_bytes))
    return judged


def figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of judged runs; every run that did not complete (out of memory, timed out, died unrecognised)
    counts in recall: a failure the model did not see coming is a miss whatever killed the run."""
    oom = [r for r in runs if r["outcome"].startswith("oom")]
    completed = [r for r in runs if r["outcome"] == "completed"]
    failed = [r for r in runs if r["outcome"] != "completed"]

    def error(chosen: list[dict[str, Any]]) -> float | None:
        errors = [abs(r["predicted"] - r["observed"]) / r["observed"] for r in chosen if r["observed"]]
        return round(sum(errors) / len(errors), 3) if errors else None

    return {
        "runs": len(runs), "oom_runs": len(oom), "completed_runs": len(completed),
        "other_failures": len(runs) - len(oom) - len(completed),
        "recall": round(sum(r["risk"] >= 1.0 for r in failed) / len(failed), 3) if failed else None,
        "false_alarms": round(sum(r["risk"] >= 1.0 for r in completed) / len(completed), 3) if completed else None,
        "peak_error": error([r for r in completed if r["fitted"]]),
        "prior_peak_error": error([r for r in completed if not r["fitted"]]),
    }


def report(judged: list[dict[str, Any]]) -> dict[str, Any]:
    print(f"{'shape':22} {'half':8} {'MiB':>5} {'risk':>6} {'P(oom)':>6} {'pool':>13} {'predicted':>10} "
          f"{'bound':>8} {'observed':>9} {'limit':>7} {'outcome':>18}")
    for r in judged:
        shown = [f"{v / MIB:.0f}M" if v else "-" for v in (r["predicted"], r["bound"], r["observed"], r["limit"])]
        print(f"{r['shape']:22} {'held-out' if r['held_out'] else 'tune':8} {r['mib']:>5} {r['risk']:>6.2f} "
              f"{r['exceed_probability']:>6.2f} {r['pool'] or '-':>13} {shown[0]:>10} {shown[1]:>8} {shown[2]:>9} "
              f"{shown[3]:>7} {r['outcome']:>18}")
    whole = figures(judged)
    halves = {half: figures([r for r in judged if r["held_out"] == flag]) for half, flag in HALVES.items()}
    result = {**whole, **{f"{half}_{k}": v for half, f in halves.items() if f["runs"] for k, v in f.items()},
              "oom_runs_by_pool": {p: sum(r["outcome"] == f"oom:{p}" for r in judged) for p in POOLS},
              "shapes": [s.name for s in SHAPES], "held_out_shapes": [s.name for s in SHAPES if s.held_out],
              "recall_goal": RECALL_GOAL, "false_alarms_goal": FALSE_ALARMS_GOAL, "peak_error_goal": PEAK_ERROR_GOAL}
    print(f"{'':22} {'recall':>8} {'false alarms':>13} {'peak error':>11}   (goals {RECALL_GOAL}, <= "
          f"{FALSE_ALARMS_GOAL}, <= {PEAK_ERROR_GOAL})")
    for label, f in (("whole matrix", whole), *((h, halves[h]) for h in HALVES if halves[h]["runs"])):
        print(f"{label:22} {f['recall']!s:>8} {f['false_alarms']!s:>13} {f['peak_error']!s:>11}")
    return result


#: The defaults `--sweep` chooses among, on recordings of the tune half only: how soon the batches' own growth
#: outweighs the prior slope, the prior slopes scaled, and the prior probability that a pool levels off. The bound's
#: confidence (a setting of its own, `checks.oom_confidence`) and the prior noise are not swept: they calibrate the
#: bound (`tests/test_oom_evaluate.py` holds it to its confidence on synthetic peaks), which eight shapes' scores
#: must not trade away.
SWEEP = {"slope_spread": (0.25, 0.5, 1.0), "slopes": (0.5, 1.0, 2.0), "level_prior": (0.25, 0.5, 0.75, 0.9)}
#: The defaults in force, as `SWEEP` names them (the prior slopes unscaled): a value moves only when the recordings
#: say so.
UNSWEPT = (ModelSettings().slope_spread, 1.0, ModelSettings().level_prior)


def swept(slope_spread: float, slopes: float, level_prior: float) -> ModelSettings:
    base = ModelSettings()
    priors = {pool: replace(base.prior(pool), bytes_per_batch_byte=base.prior(pool).bytes_per_batch_byte * slopes)
              for pool in POOLS}
    return replace(base, slope_spread=slope_spread, level_prior=level_prior, heap=priors[HEAP], direct=priors[DIRECT],
                   python_worker=priors[PYTHON_WORKER], driver_result=priors[DRIVER_RESULT])


def sweep(recordings: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Judge the tune half's recorded runs under each combination of `SWEEP`, best first (recall, then false alarms,
    then the fewest values changed from the defaults in force (`UNSWEPT`), then peak
    error): how the model's defaults were chosen, the first row. Held-out runs are dropped unread. The lines to
    print."""
    tune = [[r for r in raw if not next(s for s in SHAPES if s.name == r["shape"]).held_out]
            for raw in recordings.values()]
    rows = []
    for values in itertools.product(*SWEEP.values()):
        judged = [r for raw in tune for r in judge(raw, swept(*values))]
        f = figures(judged)
        changed = sum(v != d for v, d in zip(values, UNSWEPT, strict=True))
        rows.append((-(f["recall"] or 0), f["false_alarms"] or 0, changed, f["peak_error"] or 0, values))
    lines = [f"recordings (tune half): {', '.join(recordings)}",
             " ".join(f"{k:>12}" for k in SWEEP) + f" {'recall':>7} {'false al.':>9} {'peak err':>8}"]
    for recall, alarms, _, error, values in sorted(rows)[:15]:
        lines.append(" ".join(f"{v:>12}" for v in values) + f" {-recall:>7.3f} {alarms:>9.3f} {error:>8.3f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--half", choices=sorted(HALVES), help="run one half of the matrix only")
    parser.add_argument("--quick", action="store_true", help="two sizes per shape, for development")
    parser.add_argument("--record", type=Path, help="keep the raw runs in this file (default: a new file under "
                        "bench/recordings/)")
    parser.add_argument("--replay", type=Path, help="judge the raw runs of this file (no Spark)")
    parser.add_argument("--sweep", type=Path, nargs="+", help="choose defaults on these recordings' tune half "
                        f"(output kept in {SWEEP_OUTPUT.relative_to(RECORDINGS.parent.parent)})")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        workload, width, root, log_path, sizes = args.child
        shape = next(s for s in SHAPES if s.workload == workload and s.row_bytes == int(width))
        run_shape(shape, root, log_path, tuple(float(s) for s in sizes.split(",")))
        return
    if args.sweep:
        lines = sweep({path.name: recorded(path) for path in args.sweep})
        print("\n".join(lines))
        SWEEP_OUTPUT.write_text("\n".join(lines) + "\n")
        return
    if args.replay:
        raw = recorded(args.replay)
    else:
        shapes = tuple(s for s in SHAPES if args.half is None or s.held_out == HALVES[args.half])
        raw = measure(shapes, QUICK_SIZES_MIB if args.quick else SIZES_MIB)
        record(raw, args.record or RECORDINGS / f"oom_risk-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.jsonl")
    if args.half:
        raw = [r for r in raw if next(s for s in SHAPES if s.name == r["shape"]).held_out == HALVES[args.half]]
    print(f"split by shape: tune {[s.name for s in SHAPES if not s.held_out]} (the defaults were chosen on these), "
          f"held out {[s.name for s in SHAPES if s.held_out]}")
    print(json.dumps({"bench": "oom_risk", **report(judge(raw))}))

if __name__ == "__main__":
    main()
