"""Write guarantees of the `yt` sink, proven by killing the driver on real local Spark and restarting it.

Each scenario runs `tests/scripts/sink_fault_driver.py` in a child process (its own process group): a queue of
two tablets x 120 rows read in three micro-batches of 40 rows per tablet (`availableNow`), written in insert
calls of 10 rows. At batch 1 the driver's whole process group (driver, JVM, workers) is SIGKILLed at a fault
point; then one more child resumes every scenario from its `yt:///` checkpoint, without faults, to the end.
The output is then compared with the input row by row.

On the embedded cluster: transactional mode at all four fault points; at-least-once and the idempotent receiver at
`during_write` (some rows of the batch written) and `after_commit` (the whole batch written, Spark's commit log
not) - there every mode stages its rows, so for those two `before_write` leaves nothing to check and `after_write`
is `after_commit`. Producer mode (`producer_path`, numbered by batch) and queue to queue (numbered by the source's
row index) at `during_write`, `after_commit` and at a random moment (`random_write`: a random batch, killed after a
random number of its task's rows; the pick is in the test's id).

Through the YTsaurus backend (the real client over HTTP against the stand-in, `tests.support.standin`, its token in
the driver's `YT_TOKEN`), every mode is killed at every fault point: there at-least-once and the idempotent receiver
insert straight into the target in calls of `dyn_batch_size` rows, so each point leaves the target in another
state (nothing, part of the batch, all of it without the sink's commit, all of it with it); producer mode and queue
to queue once each. Their `yt:///` checkpoints are on the stand-in's storage (the driver maps `yt:///` onto its root,
as SPYT's file system maps it onto a real cluster's Cypress), read back here through Cypress commands.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from streaming_core.cluster import connect
from streaming_core.options import SRC_ROW_INDEX, SRC_TABLET_INDEX, SinkOptions
from streaming_core.sink import commit_log_path
from tests.support.cluster import make_queue
from tests.support.sink import COPY_SCHEMA, fill_queue, make_table, multiset, ordered_rows
from tests.support.standin import STANDIN_TOKEN
from ytsaurus_standin import StandinProxy

pytestmark = pytest.mark.spark

DRIVER = Path(__file__).parent / "scripts" / "sink_fault_driver.py"
ROWS_PER_TABLET = 120
MAX_ROWS = 40
FAIL_BATCH = 1
RUN_TIMEOUT_S = 600
IDEMPOTENT_SCHEMA = [
    {"name": SRC_TABLET_INDEX, "type": "int64", "required": True, "sort_order": "ascending"},
    {"name": SRC_ROW_INDEX, "type": "int64", "required": True, "sort_order": "ascending"},
    *COPY_SCHEMA,
]
MODES = ("transactional", "at_least_once", "idempotent")
FAULTS = ("before_write", "during_write", "after_write", "after_commit")
#: Every guarantee mode killed at every fault point through the YTsaurus backend, and each producer mode once.
STANDIN_SCENARIOS = [(mode, fault) for mode in MODES for fault in FAULTS] + [
    ("producer", "during_write"), ("queue_to_queue", "during_write")]
#: The random moment of `random_write` scenarios: (batch, rows of the task written before the kill), picked once per
#: run (the same in every xdist worker of a run: they must collect the same ids) and shown in the tests' ids.
_PICK = random.Random(os.environ.get("PYTEST_XDIST_TESTRUNUID") or None)
RANDOM_MOMENT = (_PICK.randrange(3), _PICK.randrange(MAX_ROWS))
SCENARIOS = [
    ("transactional", "before_write"), ("transactional", "during_write"), ("transactional", "after_write"),
    ("transactional", "after_commit"), ("at_least_once", "during_write"), ("at_least_once", "after_commit"),
    ("idempotent", "during_write"), ("idempotent", "after_commit"),
    ("producer", "during_write"), ("producer", "after_commit"), ("producer", "random_write"),
    ("queue_to_queue", "during_write"), ("queue_to_queue", "after_commit"), ("queue_to_queue", "random_write"),
]


@dataclass
class Outcome:
    mode: str
    fault: str
    spec: dict[str, Any]
    input: list[dict[str, Any]]
    killed_returncode: int


def _run_driver(cluster_uri: str, scenarios: list[dict[str, Any]], yt_root: Path | None) -> int:
    env = {**os.environ, "YT_TOKEN": STANDIN_TOKEN}
    args = [sys.executable, str(DRIVER), cluster_uri, json.dumps(scenarios), *([str(yt_root)] if yt_root else [])]
    proc = subprocess.Popen(args, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever the driver left of its process group
            os.killpg(proc.pid, signal.SIGKILL)
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"driver failed with {proc.returncode}:\n{err.decode()[-3000:]}")
    return proc.returncode


def run_scenarios(cluster_uri: str, scenarios: list[tuple[str, str]],
                  yt_root: Path | None = None) -> dict[tuple[str, str], Outcome]:
    """Run `scenarios` on the cluster at `cluster_uri`, checkpoints at `yt:///` (mapped onto `yt_root` when given): the
    killed runs two at a time, then one resume of them all."""
    specs = {}
    with connect(cluster_uri, token=STANDIN_TOKEN) as yt:
        for mode, fault in scenarios:
            root = f"//tmp/guarantees/{mode}-{fault}-{os.getpid()}"
            make_queue(yt, f"{root}/queue", partitions=2, consumer=f"{root}/consumer")
            rows = fill_queue(yt, f"{root}/queue", ROWS_PER_TABLET)
            make_table(yt, f"{root}/out", IDEMPOTENT_SCHEMA if mode == "idempotent" else COPY_SCHEMA)
            spec = {"queue": f"{root}/queue", "consumer": f"{root}/consumer", "target": f"{root}/out",
                    "checkpoint": f"yt:/{root}/checkpoint", "mode": mode, "max_rows": MAX_ROWS}
            specs[mode, fault] = (spec, rows)
    with ThreadPoolExecutor(max_workers=2) as pool:
        killed = dict(zip(specs, pool.map(
            lambda key: _run_driver(cluster_uri, [fault_spec(specs[key][0], key[1])], yt_root), specs), strict=True))
    assert _run_driver(cluster_uri, [spec for spec, _ in specs.values()], yt_root) == 0
    return {key: Outcome(key[0], key[1], spec, rows, killed[key]) for key, (spec, rows) in specs.items()}


def fault_spec(spec: dict[str, Any], fault: str) -> dict[str, Any]:
    """The driver's scenario for a killed run: the fault point at `FAIL_BATCH`, or the random moment."""
    if fault == "random_write":
        batch, rows = RANDOM_MOMENT
        return {**spec, "fault": "during_write", "fail_batch": batch, "crash_after_rows": rows}
    return {**spec, "fault": fault, "fail_batch": FAIL_BATCH}


@pytest.fixture(scope="module")
def outcomes(cluster_uri: str) -> dict[tuple[str, str], Outcome]:
    return run_scenarios(cluster_uri, SCENARIOS)


@pytest.fixture(scope="module")
def standin_outcomes(standin: StandinProxy) -> dict[tuple[str, str], Outcome]:
    return run_scenarios(standin.uri, STANDIN_SCENARIOS, standin.root)


def batch_rows(batch_id: int) -> Counter:
    """The (data, n) rows micro-batch `batch_id` reads (see `fill_queue`)."""
    lo, hi = batch_id * MAX_ROWS, (batch_id + 1) * MAX_ROWS
    return Counter((f"r{t}-{i}", t * 100_000 + i) for t in range(2) for i in range(lo, hi))


def output(cluster_uri: str, outcome: Outcome) -> Counter:
    with connect(cluster_uri, token=STANDIN_TOKEN) as yt:
        target = outcome.spec["target"]
        rows = yt.select_rows(target) if outcome.mode == "idempotent" else ordered_rows(yt, target)
    return multiset(rows, "data", "n")


def scenarios_of(*modes: str) -> list:
    return [pytest.param(key, id="-".join(key)) for key in SCENARIOS if key[0] in modes]


def check_transactional(cluster_uri: str, outcome: Outcome) -> None:
    assert outcome.killed_returncode == -signal.SIGKILL
    assert output(cluster_uri, outcome) == multiset(outcome.input, "data", "n")
    with connect(cluster_uri, token=STANDIN_TOKEN) as yt:
        log = yt.select_rows(commit_log_path(SinkOptions(path=outcome.spec["target"], cluster=cluster_uri)))
        staging = outcome.spec["target"] + "_staging"
        leftovers = yt.list(staging) if yt.exists(staging) else []
    assert [(r["batch_id"], r["rows"]) for r in log] == [(b, 2 * MAX_ROWS) for b in range(3)]
    assert leftovers == [], "staging tables of the killed attempt are dropped by a later commit"


def check_idempotent(cluster_uri: str, outcome: Outcome) -> None:
    assert outcome.killed_returncode == -signal.SIGKILL
    assert output(cluster_uri, outcome) == multiset(outcome.input, "data", "n")


def check_at_least_once(cluster_uri: str, outcome: Outcome) -> None:
    """Nothing missing; duplicates only of the interrupted batch, as much of it as reached the target before the
    crash: on the embedded cluster tasks stage their rows and the sink's commit publishes them, on YTsaurus tasks
    insert straight into the target."""
    assert outcome.killed_returncode == -signal.SIGKILL
    got, expected = output(cluster_uri, outcome), multiset(outcome.input, "data", "n")
    assert expected - got == Counter(), "no input row is missing"
    duplicates, batch = got - expected, batch_rows(FAIL_BATCH)
    direct = not cluster_uri.startswith("local://")
    if outcome.fault == "after_commit" or (direct and outcome.fault == "after_write"):
        assert duplicates == batch, "a batch written whole before the crash is written again"
    elif direct and outcome.fault == "during_write":
        assert Counter() < duplicates < batch, "the rows inserted before the crash, and only those, twice"
    else:
        assert duplicates == Counter(), "a batch interrupted before any row reached the table left nothing in it"
    with connect(cluster_uri, token=STANDIN_TOKEN) as yt:
        staging = outcome.spec["target"] + "_staging"
        assert not yt.exists(staging) or yt.list(staging) == [], "what the killed attempt staged is dropped"


def check_producer(cluster_uri: str, outcome: Outcome) -> None:
    """Exactly once, whatever the moment of the kill: the replay's rows at or below a session's number are skipped."""
    assert outcome.killed_returncode == -signal.SIGKILL
    assert output(cluster_uri, outcome) == multiset(outcome.input, "data", "n")
    with connect(cluster_uri, token=STANDIN_TOKEN) as yt:
        sessions = yt.select_rows(outcome.spec["target"] + "_producer")
        staging = outcome.spec["target"] + "_staging"
        assert not yt.exists(staging), "producer mode stages nothing"
    assert len(sessions) == 2, "one session per partition (batch numbering) or per source tablet (queue to queue)"
    assert all(s["epoch"] >= 1 for s in sessions), "the resumed run's tasks bumped the epochs of the killed run's"


CHECKS = {"transactional": check_transactional, "idempotent": check_idempotent, "at_least_once": check_at_least_once,
          "producer": check_producer, "queue_to_queue": check_producer}


@pytest.mark.parametrize("key", scenarios_of("transactional"))
def test_transactional_output_equals_the_input_exactly_after_a_crash(outcomes, cluster_uri, key):
    check_transactional(cluster_uri, outcomes[key])


@pytest.mark.parametrize("key", scenarios_of("idempotent"))
def test_idempotent_receiver_output_equals_the_input_exactly_after_a_crash(outcomes, cluster_uri, key):
    check_idempotent(cluster_uri, outcomes[key])


@pytest.mark.parametrize("key", scenarios_of("at_least_once"))
def test_at_least_once_misses_nothing_and_duplicates_only_the_interrupted_batch(outcomes, cluster_uri, key):
    check_at_least_once(cluster_uri, outcomes[key])


@pytest.mark.parametrize("key", [
    pytest.param(key, id="-".join(key) + ("-batch{}-after{}rows".format(*RANDOM_MOMENT) if key[1] == "random_write"
                                          else "")) for key in SCENARIOS if key[0] in ("producer", "queue_to_queue")])
def test_producer_modes_write_every_row_once_whenever_the_driver_is_killed(outcomes, cluster_uri, key):
    check_producer(cluster_uri, outcomes[key])


@pytest.mark.parametrize("key", [pytest.param(key, id="-".join(key)) for key in STANDIN_SCENARIOS])
def test_each_guarantee_holds_through_the_ytsaurus_backend_after_a_crash_at_each_point(standin_outcomes, standin, key):
    CHECKS[key[0]](standin.uri, standin_outcomes[key])


def test_yt_checkpoints_through_the_ytsaurus_backend_are_on_the_clusters_storage(standin_outcomes, standin):
    """Each query's `yt:///` checkpoint is served by the cluster's Cypress file commands: every batch committed."""
    with connect(standin.uri, token=STANDIN_TOKEN) as yt:
        for outcome in standin_outcomes.values():
            checkpoint = outcome.spec["checkpoint"].removeprefix("yt:/")
            commits = [name for name in yt.list(f"{checkpoint}/commits") if not name.endswith(".crc")]
            assert sorted(commits) == ["0", "1", "2"]
            assert yt.get(f"{checkpoint}/offsets/2/@type") == "file"
