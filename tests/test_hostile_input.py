"""The catalogue of hostile inputs: crafted or damaged data a careless user or a careful attacker can put where the
connector and opsd read, one row per input in the tables below, tried through every reader of that input.

Each input must give a clear error that names its culprit (the file and line, the queue and partition), lose
nothing (no consumer moved, no checkpoint file changed), never hang (every test has a timeout) and never print a
traceback from the CLI; in the daemon, one bad input is that query's problem only and the others' checks go on.

Classes (add a row to a table, or a table for a new class):
- `CHECKPOINTS`: damaged or crafted checkpoint files, read by `streaming_core.checkpoint` for opsd's desync, lag and
  autotune collectors, `opsd desync show | heal` and `opsd doctor`;
- `PAST_THE_END`: offsets past the queue's end (a queue recreated under its path, a consumer moved by hand, a forged
  heal), which must never be healed or advanced to;
- `SEEKS`: `opsd consumer seek` arguments that would lose rows or name what is not there;
- `PROGRESS_OFFSETS`: offsets in Spark's progress events (of this source or others), parsed by opsd's listener.

The Spark side of the same classes (the source failing a batch past the queue's end, a stop during a foreachBatch
write) is proven on real Spark in `test_source_stream.py` and `test_foreach_batch.py`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.desync.apply import apply
from opsd.checks.desync.check import DesyncCheck
from opsd.checks.desync.decide import HealDecision
from opsd.cli.main import main
from opsd.collect.positions import PositionsCollector, QueryTarget
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.results.desync import HealOutcome
from opsd.telemetry.metrics import Metrics
from streaming_core.checkpoint import MAX_FILE_BYTES, CheckpointError, newest_batch, read_checkpoint
from streaming_core.offsets import QueueOffset
from tests.support.checkpoint import METADATA, job_with_checkpoint
from tests.support.cluster import QUEUE_SCHEMA

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(60)]

#: The batches of every checkpoint of the catalogue: batch 1 committed (rows 0..9 of both partitions read).
BATCHES = {0: {0: 4, 1: 4}, 1: {0: 9, 1: 9}}


@dataclass(frozen=True)
class Hostile:
    """One crafted or damaged checkpoint file: `name` is replaced (or added) with `content` in a checkpoint that
    was sound; the error must name `culprit` (the file, relative to the checkpoint) and say `says`."""

    id: str
    name: str
    content: bytes | None  # None: a directory where the file belongs
    says: str
    culprit: str = ""

    @property
    def named(self) -> str:
        return self.culprit or self.name


def offsets_file(*source_lines: str, metadata: str = json.dumps(METADATA)) -> bytes:
    return "\n".join(["v1", metadata, *source_lines]).encode()


def source(partitions: object, **fields: object) -> str:
    """A source line like the connector's, with `partitions` (and any field) replaced as given."""
    return json.dumps({"cluster": "local", "path": "//q", "partitions": partitions, **fields})


def raw_source(partitions_json: str) -> str:
    return '{"cluster": "local", "path": "//q", "partitions": ' + partitions_json + "}"


DEEP = 100_000
CHECKPOINTS = [
    Hostile("deep-nesting-metadata", "offsets/1", offsets_file(source({"0": 9}), metadata="[" * DEEP + "]" * DEEP),
            "line 2: the batch metadata is nested too deeply"),
    Hostile("deep-nesting-source", "offsets/1", offsets_file(raw_source("[" * DEEP + "]" * DEEP)),
            "line 3: the source offset is nested too deeply"),
    Hostile("list-for-a-number", "offsets/1", offsets_file(source({"0": [9]})),
            "line 3: not a yt queue offset: partition 0: last read row (a JSON array) is not an integer"),
    Hostile("list-for-partitions", "offsets/1", offsets_file(source([9, 9])),
            "line 3: not a yt queue offset: partitions must be an object"),
    Hostile("object-for-a-number", "offsets/1", offsets_file(source({"0": {"n": 9}})),
            "line 3: not a yt queue offset: partition 0: last read row (a JSON object) is not an integer"),
    Hostile("bool-for-a-number", "offsets/1", offsets_file(source({"0": True})),
            "partition 0: last read row (a JSON boolean) is not an integer"),
    Hostile("float-for-a-number", "offsets/1", offsets_file(source({"0": 9.5})),
            "partition 0: last read row (a JSON number with a fraction) is not an integer"),
    Hostile("text-for-a-number", "offsets/1", offsets_file(source({"0": "9"})),
            "partition 0: last read row (a JSON string) is not an integer"),
    Hostile("number-past-int64", "offsets/1", offsets_file(source({"0": 2**63})),
            f"partition 0: last read row {2**63} is not an integer from -1 to {2**63 - 1}"),
    Hostile("number-below-minus-one", "offsets/1", offsets_file(source({"0": -5})),
            "partition 0: last read row -5 is not an integer from -1"),
    Hostile("number-of-5000-digits", "offsets/1", offsets_file(raw_source('{"0": ' + "9" * 5000 + "}")),
            "line 3: the source offset is not JSON"),
    Hostile("nan", "offsets/1", offsets_file(raw_source('{"0": NaN}')), "NaN is not a JSON number"),
    Hostile("infinity-timestamp", "offsets/1", offsets_file(source({"0": 9}), metadata='{"batchTimestampMs": 1e999}'),
            "line 2: batchTimestampMs (a JSON number with a fraction) is not a time in milliseconds"),
    Hostile("list-timestamp", "offsets/1", offsets_file(source({"0": 9}), metadata='{"batchTimestampMs": [1]}'),
            "line 2: batchTimestampMs (a JSON array) is not a time in milliseconds"),
    Hostile("unicode-digit-partition", "offsets/1", offsets_file(source({"\u0661": 9})),
            "a partition key of 1 characters is not a partition number"),
    Hostile("partition-past-int32", "offsets/1", offsets_file(source({str(2**31): 9})),
            "a partition key of 10 characters is not a partition number"),
    Hostile("path-not-text", "offsets/1", offsets_file(json.dumps({"cluster": "local", "path": 7, "partitions": {}})),
            "not a yt queue offset: path must be text"),
    Hostile("unicode-digits-batch-name", "offsets/\u0661\u0662", offsets_file(source({"0": 9})),
            "not a batch file name"),
    Hostile("superscript-batch-name", "offsets/²", offsets_file(source({"0": 9})), "not a batch file name"),
    Hostile("leading-zero-batch-name", "offsets/007", offsets_file(source({"0": 9})), "not a batch file name"),
    Hostile("signed-batch-name", "commits/+3", b"v1\n{}", "not a batch file name"),
    Hostile("batch-id-past-int64", "offsets/99999999999999999999", offsets_file(source({"0": 9})),
            "not a batch file name"),
    Hostile("batch-name-of-255-digits", "commits/" + "9" * 255, b"v1\n{}", "not a batch file name"),
    Hostile("invalid-utf8", "offsets/1", b"v1\n\xff\xfe\x00garbage", "not UTF-8 text (at byte 3)"),
    Hostile("empty-file", "offsets/1", b"", "line 1: expected offset log version v1, found an empty file"),
    Hostile("only-a-version", "offsets/1", b"v1", "line 2: the batch metadata line is missing"),
    Hostile("another-version", "offsets/1", b"v99\n{}\n",
            "line 1: expected offset log version v1, found 3 other characters (its content is not shown)"),
    Hostile("control-characters", "offsets/1", bytes(range(128)) * 4, "line 1: expected offset log version v1"),
    Hostile("huge-file", "offsets/1", offsets_file(source({"0": 9})) + b"\n" + b"x" * MAX_FILE_BYTES,
            f"larger than {MAX_FILE_BYTES} bytes"),
    Hostile("huge-single-line", "offsets/1", b"v1" + b" " * (MAX_FILE_BYTES + 1), f"larger than {MAX_FILE_BYTES}"),
    Hostile("directory-for-a-file", "offsets/1", None, "cannot be read"),
]


@pytest.fixture
def sound(yt, yt_root: str, tmp_path: Path) -> tuple[str, str, Path]:
    """A queue of 2 x 10 rows read by a sound checkpoint (batch 1 committed), its consumer one batch behind (the
    desync check would heal it): `(queue, consumer, checkpoint location)`."""
    q, c, location = job_with_checkpoint(yt, yt_root, tmp_path / "sound", BATCHES, committed=1, rows=20,
                                         consumer_at=5)
    return q, c, Path(location)


def damaged(yt, yt_root: str, tmp_path: Path, case: Hostile) -> tuple[str, str, Path]:
    """Another query like `sound`, whose checkpoint then gets `case`'s file."""
    root = f"{yt_root}/damaged"
    yt.create("map_node", root)
    q, c, location = job_with_checkpoint(yt, root, tmp_path / "damaged", BATCHES, committed=1, rows=20,
                                         consumer_at=5)
    path = Path(location) / case.name
    if path.is_dir() or path.exists():
        path.unlink()
    if case.content is None:
        path.mkdir()
    else:
        path.write_bytes(case.content)
    return q, c, Path(location)


def json_document(out: str) -> object:
    """The JSON document a `--json` command printed (log lines may come before it)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("{"))
    return json.loads("\n".join(lines[start:]))


def snapshot(location: Path) -> dict[str, bytes | None]:
    """Every file of a checkpoint (None for a directory), to prove nothing was changed."""
    return {str(p.relative_to(location)): None if p.is_dir() else p.read_bytes() for p in sorted(location.rglob("*"))}


@pytest.mark.parametrize("case", CHECKPOINTS, ids=lambda case: case.id)
def test_the_checkpoint_reader_refuses_it_naming_the_file(yt, yt_root, tmp_path, case: Hostile) -> None:
    _, _, location = damaged(yt, yt_root, tmp_path, case)

    with pytest.raises(CheckpointError) as error:
        read_checkpoint(str(location))

    assert f"{location}/{case.named}" in str(error.value) and case.says in str(error.value)
    assert len(str(error.value)) < 1000  # the culprit named, not echoed


@pytest.mark.parametrize("case", CHECKPOINTS, ids=lambda case: case.id)
def test_the_daemon_records_it_as_that_querys_problem_and_checks_and_heals_the_others(
        yt, yt_root, tmp_path, cluster_uri, sound, case: Hostile) -> None:
    q, c, good = sound
    bad_q, bad_c, bad = damaged(yt, yt_root, tmp_path, case)
    before = snapshot(bad)
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    targets = [QueryTarget("bad", str(bad), bad_q, bad_c, heal=True),
               QueryTarget("good", str(good), q, c, heal=True)]
    check = DesyncCheck(recorder, PositionsCollector(cluster_uri, targets))

    check.run()

    [problem] = [v.desync.facts.problem for v in recorder.status.get("bad").desync.values()]
    assert problem.startswith("CheckpointError: ") and f"{bad}/{case.named}" in problem and case.says in problem
    assert recorder.status.get("good").desync[q].last_heal.outcome == "healed"
    assert yt.get_consumer_offsets(c, q) == {0: 10, 1: 10}  # the sound query was healed
    assert yt.get_consumer_offsets(bad_c, bad_q) == {0: 5, 1: 5} and snapshot(bad) == before  # nothing lost


@pytest.mark.parametrize("case", CHECKPOINTS, ids=lambda case: case.id)
@pytest.mark.parametrize("command", [["desync", "show", "--json"], ["desync", "show"], ["desync", "heal"],
                                     ["doctor", "--json"]], ids=" ".join)
def test_the_cli_names_the_file_without_a_traceback(yt, yt_root, tmp_path, cluster_uri, capsys, case: Hostile,
                                                     command: list[str]) -> None:
    bad_q, bad_c, bad = damaged(yt, yt_root, tmp_path, case)
    before = snapshot(bad)

    code = main([*command, "--checkpoint", str(bad), "--queue", bad_q, "--consumer", bad_c, "--cluster", cluster_uri]
                if command[0] == "desync" else [*command, "--checkpoint", str(bad), "--cluster", cluster_uri])
    out, err = capsys.readouterr()

    assert "Traceback" not in out + err and code in (0, 1)
    if command[-1] == "--json":
        text = json.dumps(json_document(out), ensure_ascii=False).replace("\\\\", "\\")
        assert f"{bad}/{case.named}" in text and case.says in text
    elif command[1] == "heal":
        assert f"{bad}/{case.named}" in out and case.says in out
    else:  # a table wraps long text at the terminal's width
        assert "CheckpointError" in out
    assert yt.get_consumer_offsets(bad_c, bad_q) == {0: 5, 1: 5} and snapshot(bad) == before


# -- offsets past the queue's end -------------------------------------------------------------------------


@dataclass(frozen=True)
class PastTheEnd:
    """A queue and consumer whose offsets lie past the queue's end after `make(cluster, queue, consumer)`; the
    desync check must find `state` and refuse every heal, the consumer unmoved."""

    id: str
    make: Callable
    state: str
    partition: int = 0
    expected_consumer: dict[int, int] = field(default_factory=dict)


def recreate(rows: int) -> Callable:
    def make(yt, q: str, c: str) -> None:
        yt.remove(q)
        yt.create("table", q, attributes={"dynamic": True, "tablet_count": 2, "schema": QUEUE_SCHEMA})
        yt.register_queue_consumer(q, c)
        if rows:
            yt.insert_rows(q, [{"data": "new", "n": i} for i in range(rows)])
    return make


def consumer_moved_to(offset: int) -> Callable:
    def make(yt, q: str, c: str) -> None:
        yt.advance_consumer(c, q, 1, None, offset)
    return make


PAST_THE_END = [
    PastTheEnd("queue-recreated-empty", recreate(0), "checkpoint_ahead_of_queue", expected_consumer={0: 5, 1: 5}),
    PastTheEnd("queue-recreated-smaller", recreate(6), "checkpoint_ahead_of_queue", expected_consumer={0: 5, 1: 5}),
    PastTheEnd("consumer-moved-past-the-end", consumer_moved_to(11), "consumer_ahead_of_queue", partition=1,
               expected_consumer={0: 5, 1: 11}),
    PastTheEnd("consumer-moved-to-int64-max", consumer_moved_to(2**63 - 1), "consumer_ahead_of_queue", partition=1,
               expected_consumer={0: 5, 1: 2**63 - 1}),
]


@pytest.mark.parametrize("case", PAST_THE_END, ids=lambda case: case.id)
def test_offsets_past_the_queues_end_are_found_alerted_and_never_healed(yt, cluster_uri, sound, capsys,
                                                                        case: PastTheEnd) -> None:
    q, c, location = sound
    case.make(yt, q, c)
    registry = CollectorRegistry()
    recorder = Recorder(Metrics(registry), StatusStore())
    targets = [QueryTarget("job", str(location), q, c, heal=True)]
    check = DesyncCheck(recorder, PositionsCollector(cluster_uri, targets))

    check.run()
    code = main(["desync", "heal", "--checkpoint", str(location), "--queue", q, "--consumer", c, "--stopped",
                 "--cluster", cluster_uri])
    out, err = capsys.readouterr()

    labels = {"query": "job", "queue": q, "partition": str(case.partition), "state": case.state}
    assert registry.get_sample_value("opsd_desync_state", labels) == 1
    assert recorder.status.get("job").desync[q].last_heal.outcome == "refused_ahead_of_queue"
    assert (code, "Traceback" in out + err) == (1, False) and HealOutcome.AHEAD_OF_QUEUE.words in out
    assert yt.get_consumer_offsets(c, q) == case.expected_consumer  # no loss: the consumer did not move


def test_a_forged_heal_past_the_queues_end_is_refused_at_the_apply_step(yt, sound) -> None:
    q, c, location = sound
    recreate(0)(yt, q, c)

    result = apply(yt, HealDecision("job", q, c, HealOutcome.HEALED, 1, {0: 10, 1: 10}),
                   lambda: newest_batch(str(location)))

    assert result.outcome == HealOutcome.AHEAD_OF_QUEUE and yt.get_consumer_offsets(c, q) == {0: 5, 1: 5}


# -- consumer seeks -----------------------------------------------------------------------------------------


SEEKS = [
    ("past-the-end", ["--offset", "11"], "partition 0: consumer {c} not moved to offset 11: the queue has 10 rows"),
    ("past-int64", ["--offset", str(2**63)], "not moved to offset 9223372036854775808: the queue has 10 rows"),
    ("negative", ["--offset", "-1"], "--offset -1: an offset is a row number, 0 or more"),
    ("unknown-partition", ["--offset", "0", "--partition", "7"], "partition 7: consumer {c} not moved to offset 0: "
                                                                  "the queue has no partition 7 (2 partitions)"),
]


@pytest.mark.parametrize(("args", "says"), [s[1:] for s in SEEKS], ids=[s[0] for s in SEEKS])
def test_a_seek_that_would_lose_rows_or_names_nothing_is_refused(yt, cluster_uri, sound, capsys, args: list[str],
                                                                 says: str) -> None:
    q, c, _ = sound

    code = main(["consumer", "seek", q, c, *args, "--cluster", cluster_uri])
    out, err = capsys.readouterr()

    assert (code, "Traceback" in out + err) == (1, False) and says.format(c=c) in err
    assert yt.get_consumer_offsets(c, q) == {0: 5, 1: 5}


# -- offsets in Spark's progress events --------------------------------------------------------------------


PROGRESS_OFFSETS = [
    ("deep-nesting", '{"path": "//q", "partitions": ' + "[" * DEEP + "]" * DEEP + "}"),
    ("list-for-a-number", source({"0": [1]})),
    ("bool-for-a-number", source({"0": True})),
    ("past-int64", source({"0": 2**64})),
    ("unicode-partition", source({"\u0661": 1})),
    ("not-json", "{not json"),
    ("a-list", "[1, 2]"),
]


@pytest.mark.parametrize("value", [v for _, v in PROGRESS_OFFSETS], ids=[i for i, _ in PROGRESS_OFFSETS])
def test_a_progress_offset_that_is_not_a_yt_offset_is_ignored_not_misread(value: str) -> None:
    assert QueueOffset.from_progress(value) is None
