"""`opsd queue` / `opsd consumer`: the real CLI on a real embedded cluster, in-process through `main()` and
end to end through the installed console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from opsd.cli import main
from opsd.demo.producer import Batch, paced
from streaming_core.cluster import Cluster
from tests.support.cli import Run, assert_fails
from tests.support.cluster_contract import COMPOSITE_SCHEMA

QUEUE = "//home/app/queue"
CONSUMER = "//home/app/consumer"
OPSD = Path(sys.executable).with_name("opsd")
@pytest.fixture
def queue(opsd: Run) -> str:
    assert opsd("queue", "create", QUEUE, "--partitions", "2", "--schema", "n:int64,data:string")[0] == 0
    return QUEUE


def json_lines(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def inspect(opsd: Run) -> list[dict]:
    code, out, _ = opsd("queue", "inspect", QUEUE, "--json")
    assert code == 0
    return json.loads(out)["partitions"]


def test_end_to_end_through_the_console_script(tmp_path: Path, uri: str, cluster: Cluster) -> None:
    def opsd(*args: str) -> str:
        done = subprocess.run([str(OPSD), *args, "--cluster", uri], capture_output=True, text=True, timeout=60,
                              cwd=tmp_path, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    opsd("queue", "create", QUEUE, "--partitions", "2")
    opsd("consumer", "create", CONSUMER)
    opsd("consumer", "register", QUEUE, CONSUMER, "--vital")
    assert "appended 1000 rows" in opsd("queue", "produce", QUEUE, "--count", "1000")
    cluster.advance_consumer(CONSUMER, QUEUE, 0, 0, 200)
    report = json.loads(opsd("queue", "inspect", QUEUE, "--json"))
    assert [(p["total_rows"], p["trimmed_rows"], p["consumers"][CONSUMER]) for p in report["partitions"]] == [
        (500, 0, {"offset": 200, "unread": 300}), (500, 0, {"offset": 0, "unread": 500})]
    opsd("queue", "trim", QUEUE, "--to-consumer", CONSUMER)
    report = json.loads(opsd("queue", "inspect", QUEUE, "--json"))
    assert [(p["rows"], p["trimmed_rows"]) for p in report["partitions"]] == [(300, 200), (500, 0)]
    assert cluster.list_queue_consumer_registrations(queue_path=QUEUE)[0].vital


def test_produce_appends_json_lines_from_stdin_and_from_a_file(opsd: Run, queue: str, tmp_path: Path,
                                                              cluster: Cluster) -> None:
    code, out, err = opsd("queue", "produce", queue, "--partition", "1",
                          stdin=json_lines([{"n": 1, "data": "a"}, {"n": 2}]) + "\n")
    assert (code, err) == (0, "") and "appended 2 rows" in out  # no progress bar without a terminal
    path = tmp_path / "rows.jsonl"
    path.write_text(json_lines([{"n": i} for i in range(5)]))
    assert opsd("queue", "produce", queue, "--file", str(path))[0] == 0
    assert [t.total_row_count for t in cluster.get_tablet_infos(queue)] == [3, 4]


def test_generated_rows_fit_a_composite_json_schema(opsd: Run, cluster: Cluster) -> None:
    assert opsd("queue", "create", QUEUE, "--schema", json.dumps(COMPOSITE_SCHEMA))[0] == 0
    assert opsd("queue", "produce", QUEUE, "--count", "25")[0] == 0
    assert cluster.get_tablet_infos(QUEUE)[0].total_row_count == 25


def test_default_schema_is_one_string_column(opsd: Run, cluster: Cluster) -> None:
    opsd("queue", "create", QUEUE)
    assert cluster.get_schema(QUEUE).names == ["data"]


def test_produce_at_a_rate_spreads_the_rows_over_time(opsd: Run, queue: str, cluster: Cluster) -> None:
    assert opsd("queue", "produce", queue, "--count", "30", "--rate", "200")[0] == 0
    assert sum(t.total_row_count for t in cluster.get_tablet_infos(queue)) == 30


def test_paced_batches_wait_until_their_first_row_is_due() -> None:
    now, slept = [0.0], []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    batches = [Batch([{}] * 10, first, first + 9) for first in (1, 11, 21)]
    assert list(paced(batches, 100, clock=lambda: now[0], sleep=sleep)) == batches
    assert slept == pytest.approx([0.1, 0.1])


def test_inspect_prints_a_table_for_people(opsd: Run, queue: str) -> None:
    opsd("consumer", "create", CONSUMER)
    opsd("consumer", "register", queue, CONSUMER)
    opsd("queue", "produce", queue, "--count", "10")
    code, out, _ = opsd("queue", "inspect", queue)
    assert code == 0 and CONSUMER in out and "unread" in out and "5" in out


def test_trim_a_partition_by_count(opsd: Run, queue: str) -> None:
    opsd("queue", "produce", queue, "--count", "40")
    assert opsd("queue", "trim", queue, "--partition", "1", "--count", "15")[0] == 0
    assert [(p["rows"], p["trimmed_rows"]) for p in inspect(opsd)] == [(20, 0), (5, 15)]


def test_top_level_cluster_option_works_too(uri: str, queue: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--cluster", uri, "queue", "inspect", queue, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["queue"] == queue


# -- bad input ----------------------------------------------------------------------------------------


def test_a_row_at_fault_is_named_by_its_input_line_counting_blank_lines_too(opsd: Run, queue: str,
                                                                             tmp_path: Path) -> None:
    stdin = json_lines([{"n": 1}]) + "\n\n" + json_lines([{"n": 2}, {"n": 3, "extra": 1}])
    assert_fails(opsd("queue", "produce", queue, stdin=stdin), "input line 5 has columns ['extra']", "lines 1-5")
    given = tmp_path / "rows.json"
    given.write_text("\n" + json_lines([{"n": "x"}]))
    assert_fails(opsd("queue", "produce", queue, "--file", str(given)), "input line 2, column 'n'")
    assert sum(p["total_rows"] for p in inspect(opsd)) == 0


def test_bad_json_line_is_named_and_nothing_written(opsd: Run, queue: str) -> None:
    stdin = json_lines([{"n": 1}, {"n": 2}]) + '{"n": 3,\n' + json_lines([{"n": 4}])
    assert_fails(opsd("queue", "produce", queue, stdin=stdin), "<stdin>: line 3", "invalid JSON")
    assert_fails(opsd("queue", "produce", queue, stdin="[1, 2]\n"), "line 1", "JSON object")
    assert sum(p["total_rows"] for p in inspect(opsd)) == 0


def test_row_of_the_wrong_type_is_named_and_nothing_written(opsd: Run, queue: str) -> None:
    rows = [{"n": i, "data": str(i)} for i in range(1000)]
    rows[617]["n"] = "six hundred"
    assert_fails(opsd("queue", "produce", queue, stdin=json_lines(rows)), "input line 618, column 'n'", "lines 1-1000")
    assert sum(p["total_rows"] for p in inspect(opsd)) == 0


@pytest.mark.parametrize("args", [
    ("queue", "inspect", "//home/missing"),
    ("queue", "produce", "//home/missing", "--count", "1"),
    ("queue", "trim", "//home/missing", "--partition", "0", "--count", "1"),
    ("consumer", "register", "//home/missing", "//home/missing-consumer"),
])
def test_unknown_path_is_named_with_the_cluster_searched(opsd: Run, uri: str, args: tuple[str, ...]) -> None:
    assert_fails(opsd(*args), "//home/missing", f"(searched cluster {uri} (--cluster))")


def test_bad_cluster_uri_is_named(uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["queue", "inspect", QUEUE, "--cluster", "foo://x"]) != 0
    assert capsys.readouterr().err == (
        "opsd: error: cluster URI 'foo://x': expected local:///path, yt://proxy or yt+https://proxy\n")


@pytest.mark.parametrize(("schema", "fragment"), [
    ("n:int64,oops", "'oops' is not name:type"), ("n:int65", "int65"), ('[{"name": "n"', "invalid JSON"),
])
def test_bad_schema_is_named(opsd: Run, schema: str, fragment: str) -> None:
    assert_fails(opsd("queue", "create", QUEUE, "--schema", schema), fragment)


def test_wrong_table_kind_is_named(opsd: Run, queue: str) -> None:
    opsd("consumer", "create", CONSUMER)
    assert_fails(opsd("queue", "produce", CONSUMER, "--count", "1"), CONSUMER, "ordered_dynamic")


def test_unknown_column_is_named(opsd: Run, queue: str) -> None:
    assert_fails(opsd("queue", "produce", queue, stdin='{"colour": "red"}\n'), "colour")


def test_trim_to_an_unregistered_consumer_fails(opsd: Run, queue: str) -> None:
    opsd("consumer", "create", CONSUMER)
    assert_fails(opsd("queue", "trim", queue, "--to-consumer", CONSUMER), "not registered")


def test_trim_by_count_needs_a_partition(opsd: Run, queue: str) -> None:
    assert_fails(opsd("queue", "trim", queue, "--count", "3"), "--partition")


def test_missing_input_file_is_named(opsd: Run, queue: str, tmp_path: Path) -> None:
    assert_fails(opsd("queue", "produce", queue, "--file", str(tmp_path / "none.jsonl")), "none.jsonl")


# -- bad input: nothing lost, nothing half-written, the culprit named ---------------------------------------


def test_trim_past_a_vital_consumer_is_refused_naming_the_override(opsd: Run, queue: str) -> None:
    opsd("consumer", "create", CONSUMER)
    opsd("consumer", "register", queue, CONSUMER, "--vital")
    opsd("queue", "produce", queue, "--count", "20", "--partition", "0")

    assert_fails(opsd("queue", "trim", queue, "--partition", "0", "--count", "5"), CONSUMER,
                 "--past-vital-consumers")
    assert inspect(opsd)[0]["trimmed_rows"] == 0
    assert opsd("queue", "trim", queue, "--partition", "0", "--count", "5", "--past-vital-consumers")[0] == 0
    assert inspect(opsd)[0]["trimmed_rows"] == 5


def test_trim_below_the_current_trim_says_there_is_nothing_to_do(opsd: Run, queue: str) -> None:
    opsd("queue", "produce", queue, "--count", "20", "--partition", "0")
    opsd("queue", "trim", queue, "--partition", "0", "--count", "8")
    code, out, _ = opsd("queue", "trim", queue, "--partition", "0", "--count", "3")
    assert code == 0 and "already trimmed to row 8; nothing to do" in out and "trimmed to row 3" not in out


def test_bad_json_deep_in_a_file_appends_nothing(opsd: Run, queue: str, tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json_lines([{"n": i, "data": str(i)} for i in range(15_000)]) + "{broken\n")
    assert_fails(opsd("queue", "produce", queue, "--file", str(path)), "line 15001", "invalid JSON")
    assert sum(p["total_rows"] for p in inspect(opsd)) == 0


def test_a_bad_row_deep_in_a_file_appends_nothing(opsd: Run, queue: str, tmp_path: Path) -> None:
    rows = [{"n": i, "data": str(i)} for i in range(15_001)]
    rows[15_000]["n"] = "many"
    path = tmp_path / "rows.jsonl"
    path.write_text(json_lines(rows))
    assert_fails(opsd("queue", "produce", queue, "--file", str(path)), "'n'", "nothing was appended")
    assert sum(p["total_rows"] for p in inspect(opsd)) == 0


def test_a_failure_on_stdin_after_appends_says_what_was_appended_and_how_to_resume(opsd: Run, queue: str) -> None:
    stdin = json_lines([{"n": i, "data": str(i)} for i in range(15_000)]) + "{broken\n"
    assert_fails(opsd("queue", "produce", queue, stdin=stdin), "line 15001",
                 "10000 rows, input lines 1-10000 of <stdin>, were appended", "tail -n +10001")
    assert sum(p["total_rows"] for p in inspect(opsd)) == 10_000


@pytest.mark.parametrize("partitions", ["0", "100000000", "1000000", "-3"])
def test_partitions_are_bounded_as_in_ytsaurus(opsd: Run, partitions: str) -> None:
    assert_fails(opsd("queue", "create", QUEUE, "--partitions", partitions), "--partitions", "10000")


@pytest.mark.parametrize(("args", "fragments"), [
    (("queue", "create", "//"), ("//", "root")),
    (("queue", "create", QUEUE, "--schema", '[{"name": "k", "type": "int64", "sort_order": "ascending"}]'),
     ("sort_order", "'k'")),
    (("queue", "create", QUEUE, "--schema", "[1, 2]"), ("--schema", "list of columns")),
    (("queue", "create", QUEUE, "--schema", "[]"), ("--schema",)),
])
def test_create_refuses_what_is_not_a_queue(opsd: Run, args: tuple[str, ...], fragments: tuple[str, ...]) -> None:
    assert_fails(opsd(*args), *fragments)


@pytest.mark.parametrize(("flag", "value"), [("--count", "-1"), ("--rate", "-5")])
def test_negative_count_or_rate_is_refused(opsd: Run, queue: str, flag: str, value: str) -> None:
    assert_fails(opsd("queue", "produce", queue, flag, value), flag)


def test_a_partition_that_does_not_exist_is_named(opsd: Run, queue: str) -> None:
    assert_fails(opsd("queue", "produce", queue, "--count", "1", "--partition", "7"), "--partition 7", "0..1")


@pytest.mark.parametrize("args", [
    ("queue", "inspect", QUEUE), ("queue", "produce", QUEUE, "--count", "1"),
    ("queue", "trim", QUEUE, "--partition", "0", "--count", "1"), ("consumer", "register", QUEUE, CONSUMER),
])
def test_commands_that_read_refuse_a_root_where_nothing_exists(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               args: tuple[str, ...]) -> None:
    typo = tmp_path / "clusetr"
    assert main([*args, "--cluster", f"local://{typo}"]) == 1
    err = capsys.readouterr().err
    assert QUEUE in err and str(typo) in err and "no embedded cluster" in err
    assert not typo.exists(), "a typo must not create an empty cluster"


def test_reshard_adds_empty_partitions_and_keeps_the_old_rows(opsd: Run, queue: str, cluster: Cluster) -> None:
    opsd("queue", "produce", queue, "--count", "10")

    code, out, _ = opsd("queue", "reshard", queue, "--tablets", "4")

    assert code == 0 and f"resharded {queue} from 2 to 4 partitions: partitions 2-3 added, empty" in out
    assert [(p["partition"], p["total_rows"]) for p in inspect(opsd)] == [(0, 5), (1, 5), (2, 0), (3, 0)]
    assert "has 4 partition(s) already; nothing to do" in opsd("queue", "reshard", queue, "--tablets", "4")[1]
    opsd("queue", "produce", queue, "--count", "3", "--partition", "3")
    assert cluster.get_tablet_infos(queue)[3].total_row_count == 3


def test_reshard_to_fewer_partitions_removes_only_fully_trimmed_ones(opsd: Run, queue: str) -> None:
    opsd("queue", "produce", queue, "--count", "8")

    assert_fails(opsd("queue", "reshard", queue, "--tablets", "1"), "tablet 1 rows [0, 4)",
                 f"opsd queue trim {queue} --partition 1 --count 4")
    assert opsd("queue", "trim", queue, "--partition", "1", "--count", "4")[0] == 0
    code, out, _ = opsd("queue", "reshard", queue, "--tablets", "1")

    assert code == 0 and "partitions 1 removed" in out and "QueueReshardedError" in out
    assert [(p["partition"], p["rows"]) for p in inspect(opsd)] == [(0, 4)]


@pytest.mark.parametrize("tablets", ["0", "10001"])
def test_reshard_needs_a_tablet_count_within_the_limit(opsd: Run, queue: str, tablets: str) -> None:
    assert_fails(opsd("queue", "reshard", queue, "--tablets", tablets), "--tablets must be from 1 to 10000")


def test_reshard_of_a_table_that_is_no_queue_names_its_kind(opsd: Run, queue: str) -> None:
    assert opsd("table", "create", "//home/app/kv", "--schema", "k:int64,v:string", "--sorted-by", "k")[0] == 0
    assert_fails(opsd("queue", "reshard", "//home/app/kv", "--tablets", "2"), "//home/app/kv",
                 "expected ordered_dynamic table, found sorted_dynamic")
