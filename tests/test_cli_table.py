"""`opsd table create | read` and every YT type through the CLI: JSON lines in with `opsd queue produce`,
out with `opsd table read --json`, on a real embedded cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from opsd.cli.table import READ_LIMIT
from streaming_core.cluster import Cluster
from streaming_core.cluster.base import ORDERED, SORTED, STATIC
from tests.support.cli import Run, assert_fails
from tests.support.yt_types import TYPES, YtType

TABLE = "//home/app/result"


def rows_of(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.parametrize("yt_type", TYPES, ids=[t.id for t in TYPES])
def test_every_type_round_trips_through_produce_and_read_json(opsd: Run, yt_type: YtType) -> None:
    schema = json.dumps([{"name": "i", "type": "int64"}, {"name": yt_type.column, "type_v3": yt_type.type_v3}])
    assert opsd("queue", "create", TABLE, "--schema", schema)[0] == 0
    given = "".join(json.dumps({"i": i, yt_type.column: v}) + "\n" for i, (v, _) in enumerate(yt_type.values))
    code, _, err = opsd("queue", "produce", TABLE, stdin=given)
    assert code == 0, err
    code, out, _ = opsd("table", "read", TABLE, "--json")
    assert rows_of(out) == [{"i": i, yt_type.column: want} for i, (_, want) in enumerate(yt_type.values)]
    # The printed form is itself valid input and reads back the same.
    assert opsd("queue", "create", TABLE + "2", "--schema", schema)[0] == 0
    assert opsd("queue", "produce", TABLE + "2", stdin=out)[0] == 0
    assert opsd("table", "read", TABLE + "2", "--json")[1] == out


def test_a_dict_column_takes_an_object_or_yt_pairs(opsd: Run, cluster: Cluster) -> None:
    opsd("queue", "create", TABLE, "--schema", '[{"name": "m", "type_v3": {"type_name": "dict", "key": "string", '
                                               '"value": "int64"}}]')
    assert opsd("queue", "produce", TABLE, stdin='{"m": {"a": 1}}\n{"m": [["b", 2]]}\n')[0] == 0
    assert sorted(r["m"] for b in cluster.read_tablet(TABLE, 0, 0, 2) for r in b.to_pylist()) == [
        [("a", 1)], [("b", 2)]]


@pytest.mark.parametrize("line, fragments", [
    ('{"m": [["a"]]}', ["line 1", "column 'm'", "[key, value] pairs"]),
    ('{"m": 5}', ["line 1", "column 'm'", "expected a JSON list"]),
    ('{"m": [["a", "x"]]}', ["column 'm'"]),
])
def test_a_bad_dict_value_is_named_and_nothing_written(opsd: Run, cluster: Cluster, line: str,
                                                       fragments: list[str]) -> None:
    opsd("queue", "create", TABLE, "--schema", '[{"name": "m", "type_v3": {"type_name": "dict", "key": "string", '
                                               '"value": "int64"}}]')
    assert_fails(opsd("queue", "produce", TABLE, stdin=line + "\n"), *fragments)
    assert cluster.get(TABLE + "/@row_count") == 0


@pytest.mark.parametrize("args, kind, keys, message", [
    ((), ORDERED, [], "created ordered_dynamic table //home/app/result with 1 tablet(s)"),
    (("--tablets", "3"), ORDERED, [], "with 3 tablet(s)"),
    (("--sorted-by", "k2,k1"), SORTED, ["k2", "k1"], "created sorted_dynamic table //home/app/result keyed by k2, k1"),
    (("--static",), STATIC, [], "created static table"),
    (("--static", "--sorted-by", "k1"), STATIC, ["k1"], "keyed by k1"),
])
def test_create_makes_each_kind_of_table(opsd: Run, cluster: Cluster, args: tuple[str, ...], kind: str,
                                         keys: list[str], message: str) -> None:
    code, out, _ = opsd("table", "create", TABLE, "--schema", "k1:int64,k2:string,v:double", *args)
    assert code == 0 and message in out
    assert cluster.node_info(TABLE).kind == kind
    assert cluster.get_schema(TABLE).key_columns == keys
    assert cluster.get_schema(TABLE).names[:len(keys)] == keys


@pytest.mark.parametrize("args, fragments", [
    (("--sorted-by", "nope"), ["--sorted-by", "nope", "k1"]),
    (("--sorted-by", ","), ["--sorted-by"]),
    (("--static", "--tablets", "2"), ["--tablets", "static"]),
    (("--tablets", "0"), ["--tablets", "from 1 to 10000"]),
    (("--tablets", "100000000"), ["--tablets", "from 1 to 10000"]),
    (("--schema", "k1:int65"), ["int65"]),
])
def test_create_names_the_bad_option_and_creates_nothing(opsd: Run, cluster: Cluster, args: tuple[str, ...],
                                                         fragments: list[str]) -> None:
    schema = () if "--schema" in args else ("--schema", "k1:int64,v:string")
    assert_fails(opsd("table", "create", TABLE, *schema, *args), *fragments)
    assert not cluster.exists(TABLE)


def test_create_an_existing_table_fails(opsd: Run) -> None:
    opsd("table", "create", TABLE, "--schema", "k:int64")
    assert_fails(opsd("table", "create", TABLE, "--schema", "k:int64"), TABLE, "already exists")


@pytest.mark.parametrize("kind_args", [(), ("--sorted-by", "k"), ("--static",), ("--static", "--sorted-by", "k")],
                         ids=["ordered", "sorted", "static", "sorted-static"])
def test_read_prints_rows_of_every_table_kind_up_to_the_limit(opsd: Run, cluster: Cluster,
                                                              kind_args: tuple[str, ...]) -> None:
    opsd("table", "create", TABLE, "--schema", "k:int64,v:string", *kind_args)
    rows = [{"k": k, "v": f"v{k}"} for k in (3, 1, 2)]
    if "--static" in kind_args:
        cluster.write_table(TABLE, rows)
    else:
        cluster.insert_rows(TABLE, rows)
    expected = sorted(rows, key=lambda r: r["k"]) if "--sorted-by" in kind_args else rows
    assert rows_of(opsd("table", "read", TABLE, "--json")[1]) == expected
    assert rows_of(opsd("table", "read", TABLE, "--json", "--limit", "2")[1]) == expected[:2]
    code, out, _ = opsd("table", "read", TABLE)
    assert code == 0 and "┃ k ┃ v  ┃" in out and "│ 3 │ v3 │" in out


def test_read_a_queue_reads_every_tablet_from_its_trimmed_head(opsd: Run, cluster: Cluster) -> None:
    opsd("table", "create", TABLE, "--schema", "n:int64", "--tablets", "2")
    cluster.insert_rows(TABLE, [{"n": i} for i in range(6)])
    cluster.trim_rows(TABLE, 0, 1)
    assert sorted(r["n"] for r in rows_of(opsd("table", "read", TABLE, "--json")[1])) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("args, fragments", [
    (("//home/missing",), ["//home/missing"]),
    ((TABLE, "--limit", "-1"), ["--limit"]),
])
def test_read_names_what_is_wrong(opsd: Run, args: tuple[str, ...], fragments: list[str]) -> None:
    opsd("table", "create", TABLE, "--schema", "k:int64")
    assert_fails(opsd("table", "read", *args), *fragments)


def test_generated_rows_fit_every_type(opsd: Run, cluster: Cluster) -> None:
    schema = json.dumps([{"name": t.column, "type_v3": t.type_v3} for t in TYPES])
    assert opsd("queue", "create", TABLE, "--schema", schema)[0] == 0
    assert opsd("queue", "produce", TABLE, "--count", "5")[0] == 0
    assert len(rows_of(opsd("table", "read", TABLE, "--json")[1])) == 5


@pytest.mark.parametrize("kind", ["queue", "static"])
def test_read_prints_a_limited_number_of_rows_by_default_and_says_how_many_of_how_many(
        opsd: Run, cluster: Cluster, kind: str) -> None:
    if kind == "queue":
        cluster.create("table", TABLE, recursive=True, attributes={
            "schema": [{"name": "i", "type": "int64"}], "dynamic": True, "tablet_count": 2})
        cluster.insert_rows(TABLE, [{"$tablet_index": i % 2, "i": i} for i in range(250)])
    else:
        cluster.create("table", TABLE, recursive=True, attributes={"schema": [{"name": "i", "type": "int64"}]})
        cluster.write_table(TABLE, [{"i": i} for i in range(250)])

    code, out, err = opsd("table", "read", TABLE, "--json")
    assert code == 0 and len(rows_of(out)) == READ_LIMIT
    assert err.strip() == f"{READ_LIMIT} of 250 rows (--limit N or --all prints more)"
    code, out, err = opsd("table", "read", TABLE, "--json", "--all")
    assert code == 0 and sorted(r["i"] for r in rows_of(out)) == list(range(250)) and err == ""
    code, out, _ = opsd("table", "read", TABLE, "--limit", "7")
    assert code == 0 and out.rstrip().endswith("7 of 250 rows (--limit N or --all prints more)")
    code, out, _ = opsd("table", "read", TABLE, "--limit", "250")
    assert code == 0 and out.rstrip().endswith("\n250 rows")


def test_a_read_piped_into_a_reader_that_stops_early_ends_quietly(uri: str, cluster: Cluster, tmp_path) -> None:
    cluster.create("table", TABLE, recursive=True, attributes={"schema": [{"name": "s", "type": "string"}]})
    cluster.write_table(TABLE, [{"s": "x" * 1000} for _ in range(2000)])
    opsd_bin = Path(sys.executable).parent / "opsd"

    run = subprocess.run(f"'{opsd_bin}' table read {TABLE} --all --json --cluster '{uri}' | head -1; "
                         "echo rc=${PIPESTATUS[0]}", shell=True, executable="/bin/bash", capture_output=True,
                         text=True, timeout=120, check=False)

    assert run.stdout.splitlines()[0] == json.dumps({"s": "x" * 1000}) and run.stdout.splitlines()[-1] == "rc=141"
    assert run.stderr == ""
