"""Rows between Arrow and the bytes the YTsaurus HTTP proxy sends and takes, per core, with wire bytes in memory.

`python -m bench.wire` (from the repository root, in the venv). Four schemas:

- `flat`: 3 columns (int64, timestamp, a 160-character utf8), ~205 bytes a row in binary YSON;
- `wide`: 20 columns of every kind the backend maps: optional scalars, date / datetime / timestamp, decimal,
  yson, list, struct, dict, tuple, variant, an optional of an optional, uuid;
- `wide-yson`: `wide` without its `yson` column (what that one column costs: below). The `yson` values
  (`{source=bench;n=...}`) share one shape, so the column reader writes their text from the tokens
  (`wire.yson_text`); a `yson` column of mixed shapes, doubles or attributes goes through the bindings' parse and
  dump instead (~1 µs a small value more: `docs/wire_formats.md`), which this bench does not show;
- `blob`: one 1 KB string column.

Per schema and wire format, decode (bytes -> Arrow table) and encode (Arrow table -> bytes):

- `yson`: binary YSON as `select_rows` / `pull_consumer` / `lookup_rows` return it and `insert_rows` takes it,
  through `decode_wire` / `encode_wire` (decode: column by column with numpy, `wire.yson_columns`): the `raw=True`
  path;
- `yson, objects`: the same bytes through the bindings' Python objects (`decode_objects`, what `decode_wire` falls
  back to for bytes the column reader declines), decode only: context;
- `yson, python rows`: the same bytes through Python rows, as `raw=False` calls go (`WIRE_FORMAT.load_rows` +
  `from_yt_rows`; `to_yt_rows` + `WIRE_FORMAT.dump_rows`): context, what the backend pays until it uses bytes;
- `arrow`: the Arrow IPC stream `insert_rows` takes (`arrow_insert.encode`); its decode is what the proxy's side
  (the HTTP stand-in) pays. No read command of the HTTP API serves Arrow or skiff (docs/wire_formats.md), and
  the `wide` schema has types the proxy's Arrow parser does not settle, so it has no `arrow` row;
- `arrow ipc`: an Arrow IPC stream of the Arrow table itself, read and written by pyarrow: the floor.

Each figure is rows / CPU seconds of this process (`time.process_time`, Arrow's thread pool at one thread), the
median of `REPEATS` runs: per core, and steady on a machine where other work runs. A readable table, then one
JSON line: `decode_rows_per_s` (flat, the best format the read commands serve: YSON; goal 1,000,000, issue bar
300,000), `encode_rows_per_s` (flat, the best format `insert_rows` takes; goal 500,000, bar 200,000), the YSON
figures `decode_yson_rows_per_s` / `encode_yson_rows_per_s`, `wide_vs_flat_per_byte` (flat YSON decode bytes/s
over wide YSON decode bytes/s; goal <= 3) with the same ratio for encoding and for `wide-yson` beside it, and
`client_cpu_s_per_m_wide_rows` (CPU seconds to decode a million `wide` rows into Arrow; goal <= 1).

What it cannot show: the bytes decoded are `encode_wire(binary_yson=True)`'s (what the stand-in sends), not a
real proxy's (the same layout as YTsaurus' schemaful writer: one map per row, every column in order, binary
tokens only; a proxy that wrote otherwise would send the reads to the object path, `yson, objects`); the rows
are made up, so string lengths, list lengths and the share of nulls are the bench's own (a list is read a round
per item: long lists cost more per byte); the figures are CPU time, so the response's transfer, the proxy's own
CPU and Arrow's threads are out; and decode in a Spark task also pays the worker's Arrow-to-JVM handoff, which
`bench.source` measures.

End to end (`end_to_end`): the connector in a Spark session (`local[2]`) reads a queue of the flat schema into
`noop` through the YTsaurus backend against the HTTP stand-in (a process of its own) and from the embedded
cluster, and writes it (at-least-once) into a table of each, alternating: `e2e_source_vs_embedded` (goal >= 0.5)
and `e2e_sink_vs_embedded`, with the stand-in's own CPU per million rows beside them (it runs on the same 2 cores
as Spark, so part of the gap is the stand-in's, not the connector's).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

from streaming_core.cluster import TableSchema
from streaming_core.cluster.schema import to_arrow_table
from streaming_core.cluster.ytsaurus.rows import WIRE_FORMAT, from_yt_rows, to_yt_rows
from streaming_core.cluster.ytsaurus.wire import arrow_insert, decode_objects, decode_wire, encode_wire

REPEATS = 5
DECODE_GOAL, DECODE_BAR = 1_000_000, 300_000
ENCODE_GOAL, ENCODE_BAR = 500_000, 200_000
WIDE_VS_FLAT_GOAL = 3.0
WIDE_CPU_GOAL = 1.0  # CPU seconds per million wide rows decoded
YSON, OBJECTS, PYTHON_ROWS, ARROW, IPC = "yson", "yson, objects", "yson, python rows", "arrow", "arrow ipc"


def _optional(item: Any) -> dict[str, Any]:
    return {"type_name": "optional", "item": item}


SCHEMAS: dict[str, list[dict[str, Any]]] = {
    "flat": [{"name": "id", "type_v3": "int64"}, {"name": "ts", "type_v3": "timestamp"},
             {"name": "payload", "type_v3": "utf8"}],
    "wide": [
        {"name": "k", "type_v3": "int64"}, {"name": "u", "type_v3": "uint64"},
        {"name": "d", "type_v3": _optional("double")}, {"name": "f", "type_v3": "float"},
        {"name": "b", "type_v3": _optional("bool")}, {"name": "s", "type_v3": _optional("string")},
        {"name": "name", "type_v3": "utf8"}, {"name": "day", "type_v3": "date"},
        {"name": "at", "type_v3": _optional("datetime")}, {"name": "ts", "type_v3": "timestamp"},
        {"name": "iv", "type_v3": "interval"},
        {"name": "price", "type_v3": {"type_name": "decimal", "precision": 18, "scale": 4}},
        {"name": "meta", "type_v3": "yson"},
        {"name": "tags", "type_v3": {"type_name": "list", "item": "utf8"}},
        {"name": "point", "type_v3": {"type_name": "struct", "members": [
            {"name": "x", "type": "double"}, {"name": "label", "type": _optional("utf8")}]}},
        {"name": "counts", "type_v3": {"type_name": "dict", "key": "utf8", "value": "int64"}},
        {"name": "pair", "type_v3": {"type_name": "tuple", "elements": [{"type": "int32"}, {"type": "string"}]}},
        {"name": "either", "type_v3": {"type_name": "variant", "members": [{"name": "n", "type": "int64"},
                                                                           {"name": "t", "type": "utf8"}]}},
        {"name": "maybe", "type_v3": _optional(_optional("int32"))},
        {"name": "id", "type_v3": _optional("uuid")},
    ],
    "blob": [{"name": "body", "type_v3": "string"}],
}
SCHEMAS["wide-yson"] = [c for c in SCHEMAS["wide"] if c["type_v3"] != "yson"]
ROWS = {"flat": 100_000, "wide": 30_000, "wide-yson": 30_000, "blob": 50_000}
_EPOCH = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)


def _row(schema: str, i: int) -> dict[str, Any]:
    if schema == "flat":
        return {"id": i, "ts": _EPOCH + dt.timedelta(microseconds=i), "payload": f"{i:08d}" + "x" * 152}
    if schema == "blob":
        return {"body": f"{i:08d}" + "b" * 1016}
    if schema == "wide-yson":
        return {k: v for k, v in _row("wide", i).items() if k != "meta"}
    return {
        "k": i, "u": 2**63 + i, "d": None if i % 5 == 0 else i / 3, "f": i / 4, "b": None if i % 7 == 0 else i % 2 == 0,
        "s": None if i % 3 == 0 else f"s{i}", "name": f"name-{i}", "day": dt.date(2024, 1, 1) + dt.timedelta(i % 365),
        "at": None if i % 4 == 0 else _EPOCH + dt.timedelta(seconds=i), "ts": _EPOCH + dt.timedelta(microseconds=i),
        "iv": -i, "price": Decimal(i) / 10_000, "meta": b"{source=bench;n=" + str(i).encode() + b"}",
        "tags": [f"t{i % 10}", f"u{i % 3}"][: i % 3], "point": {"x": i / 2, "label": None if i % 2 else f"p{i}"},
        "counts": [("a", i), ("b", -i)], "pair": {"_1": i % 1000, "_2": f"e{i}"},
        "either": {"_vn": i, "_vt": None} if i % 2 else {"_vn": None, "_vt": f"v{i}"},
        "maybe": None if i % 6 == 0 else i % 100, "id": str(uuid.UUID(int=i)),
    }


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _python_rows_bytes(schema: TableSchema, table: pa.Table) -> bytes:
    stream = io.BytesIO()
    WIRE_FORMAT.dump_rows(to_yt_rows(schema, table), stream)
    return stream.getvalue()


def _formats(schema: TableSchema, table: pa.Table
             ) -> dict[str, tuple[Callable[[], Any], Callable[[], Any] | None, int]]:
    """Per format: (decode, encode or None where it is another format's, wire bytes)."""
    yson = encode_wire(schema, table, binary_yson=True)  # as a proxy writes rows: `yson` values in binary too
    fields, types = list(schema.arrow_schema()), {c.name: c.type_v3 for c in schema.columns}
    formats = {
        YSON: (lambda: decode_wire(schema, yson), lambda: encode_wire(schema, table), len(yson)),
        OBJECTS: (lambda: decode_objects(yson, fields, types), None, len(yson)),
        PYTHON_ROWS: (lambda: from_yt_rows(schema, list(WIRE_FORMAT.load_rows(io.BytesIO(yson)))),
                      lambda: _python_rows_bytes(schema, table), len(yson)),
    }
    if arrow_insert.supported(schema):
        arrow = arrow_insert.encode(schema, table)
        formats[ARROW] = (lambda: arrow_insert.decode(schema, arrow), lambda: arrow_insert.encode(schema, table),
                          len(arrow))
    ipc = _ipc_bytes(table)
    formats[IPC] = (lambda: pa.ipc.open_stream(ipc).read_all(), lambda: _ipc_bytes(table), len(ipc))
    return formats


def _cpu_seconds(work: Callable[[], Any]) -> float:
    """Median CPU seconds of `REPEATS` runs, after one warm-up."""
    work()
    times = []
    for _ in range(REPEATS):
        started = time.process_time()
        work()
        times.append(time.process_time() - started)
    return statistics.median(times)


def measure() -> dict[str, dict[str, dict[str, float]]]:
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name, spec in SCHEMAS.items():
        schema = TableSchema.from_yt(spec)
        rows = ROWS[name]
        table = to_arrow_table(schema, [_row(name, i) for i in range(rows)], f"//bench/{name}")
        results[name] = {}
        for fmt, (decode, encode, size) in _formats(schema, table).items():
            results[name][fmt] = {"decode": rows / _cpu_seconds(decode), "bytes_per_row": size / rows}
            if encode is not None:
                results[name][fmt]["encode"] = rows / _cpu_seconds(encode)
    return results


def report(results: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = ["rows/s per core (CPU time), wire bytes in memory",
             f"{'schema':<10}{'format':<20}{'bytes/row':>10}{'decode':>17}{'encode':>14}"]
    for name, formats in results.items():
        for fmt, f in formats.items():
            encode = f"{f['encode']:>14,.0f}" if "encode" in f else f"{'-':>14}"
            lines.append(f"{name:<10}{fmt:<20}{f['bytes_per_row']:>10,.0f}{f['decode']:>17,.0f}{encode}")
    lines.append("arrow: insert_rows input only (its decode is the proxy's side); no read command serves arrow or "
                 "skiff; wide has types the proxy's arrow parser does not settle")
    lines.append(f"goals (flat): decode >= {DECODE_GOAL:,} (bar {DECODE_BAR:,}), encode >= {ENCODE_GOAL:,} "
                 f"(bar {ENCODE_BAR:,}); wide within {WIDE_VS_FLAT_GOAL:g}x of flat per byte, "
                 f"decoding a million wide rows in <= {WIDE_CPU_GOAL:g} CPU second")
    lines.append(f"measured: wide / flat per byte {_per_byte(results, 'decode'):.2f} "
                 f"(without the yson column {_per_byte(results, 'decode', 'wide-yson'):.2f}), "
                 f"{_wide_cpu(results):.2f} CPU s per million wide rows")
    return "\n".join(lines)


def _per_byte(results: dict[str, dict[str, dict[str, float]]], direction: str, wide: str = "wide") -> float:
    """How many times more bytes/s flat YSON moves than wide YSON."""
    flat, other = results["flat"][YSON], results[wide][YSON]
    return (flat[direction] * flat["bytes_per_row"]) / (other[direction] * other["bytes_per_row"])


def _wide_cpu(results: dict[str, dict[str, dict[str, float]]]) -> float:
    """CPU seconds to decode a million wide rows from YSON into Arrow."""
    return 1e6 / results["wide"][YSON]["decode"]


def summary(results: dict[str, dict[str, dict[str, float]]]) -> dict[str, Any]:
    flat = results["flat"]
    encoders = [fmt for fmt in (YSON, ARROW) if fmt in flat]
    best_encoder = max(encoders, key=lambda fmt: flat[fmt]["encode"])
    return {
        "bench": "wire",
        "decode_rows_per_s": round(flat[YSON]["decode"]), "decode_format": YSON,
        "decode_goal": DECODE_GOAL, "decode_bar": DECODE_BAR,
        "encode_rows_per_s": round(flat[best_encoder]["encode"]), "encode_format": best_encoder,
        "encode_goal": ENCODE_GOAL, "encode_bar": ENCODE_BAR,
        "decode_yson_rows_per_s": round(flat[YSON]["decode"]), "encode_yson_rows_per_s": round(flat[YSON]["encode"]),
        "wide_vs_flat_per_byte": round(_per_byte(results, "decode"), 2),
        "wide_vs_flat_per_byte_encode": round(_per_byte(results, "encode"), 2),
        "wide_vs_flat_per_byte_without_yson": round(_per_byte(results, "decode", "wide-yson"), 2),
        "wide_vs_flat_goal": WIDE_VS_FLAT_GOAL,
        "client_cpu_s_per_m_wide_rows": round(_wide_cpu(results), 3),
        "client_cpu_s_per_m_wide_rows_objects": round(1e6 / results["wide"][OBJECTS]["decode"], 3),
        "client_cpu_goal": WIDE_CPU_GOAL,
        "results": {name: {fmt: {k: round(v) for k, v in f.items()} for fmt, f in formats.items()}
                    for name, formats in results.items()},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.wire", description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-end-to-end", action="store_true",
                        help="the wire figures only, without the Spark queries through the stand-in")
    args = parser.parse_args(argv)
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    results = measure()
    print(report(results))
    pa.set_cpu_count(os.cpu_count() or 1)
    if args.no_end_to_end:
        print(json.dumps(summary(results)))
        return
    e2e = end_to_end()
    print(e2e_report(e2e))
    print(json.dumps({**summary(results), **e2e_summary(e2e)}))



# -- end to end: the connector through the stand-in, beside the embedded path ----------------------------------

E2E_ROWS = 400_000
E2E_TABLETS = 4
E2E_REPEATS = 2
E2E_GOAL = 0.5
E2E_SCHEMA = SCHEMAS["flat"]


def _fill(cluster: Any, queue: str, rows: int) -> None:
    cluster.create("table", queue, recursive=True, attributes={
        "dynamic": True, "tablet_count": E2E_TABLETS, "schema": E2E_SCHEMA})
    schema = TableSchema.from_yt(E2E_SCHEMA)
    table = to_arrow_table(schema, [_row("flat", i) for i in range(10_000)], queue)
    for tablet in range(E2E_TABLETS):
        for _ in range(rows // E2E_TABLETS // table.num_rows):
            cluster.insert_rows(queue, table, tablet_index=tablet)


def _consumer(cluster: Any, queue: str) -> str:
    consumer = f"//bench/consumer-{uuid.uuid4().hex[:8]}"
    cluster.create_consumer(consumer, recursive=True)
    cluster.register_queue_consumer(queue, consumer)
    return consumer


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def end_to_end() -> dict[str, float]:
    """Source and at-least-once sink rows/s through the stand-in (in a process of its own) and on the embedded
    cluster, alternating, in one Spark session; the stand-in's CPU seconds per million rows beside them."""
    from streaming_core import build_session
    from streaming_core.cluster import connect

    work = Path(tempfile.mkdtemp(prefix="bench-wire-"))
    embedded_uri = f"local://{work / 'embedded'}"
    proxy = subprocess.Popen([sys.executable, "-m", "ytsaurus_standin", str(work / "standin")],
                             stdout=subprocess.PIPE, text=True)
    try:
        standin_uri = proxy.stdout.readline().strip()
        uris = {"embedded": embedded_uri, "stand-in": standin_uri}
        for uri in uris.values():
            with connect(uri) as cluster:
                _fill(cluster, "//bench/queue", E2E_ROWS)
                cluster.create("table", "//bench/out", recursive=True, attributes={
                    "dynamic": True, "tablet_count": 1, "schema": E2E_SCHEMA})
        spark = build_session("bench-wire", master="local[2]", cluster=embedded_uri, conf={
            "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
        timings: dict[str, list[float]] = {f"{kind} {name}": [] for kind in ("source", "sink") for name in uris}
        standin_cpu: dict[str, float] = {"source": 0.0, "sink": 0.0}
        for _ in range(E2E_REPEATS):
            for name, uri in uris.items():
                for kind in ("source", "sink"):
                    before = _cpu_of(proxy.pid)
                    timings[f"{kind} {name}"].append(_query(spark, kind, uri, embedded_uri, work))
                    if name == "stand-in":
                        standin_cpu[kind] += _cpu_of(proxy.pid) - before
        spark.stop()
    finally:
        proxy.terminate()
        proxy.wait(30)
    rates = {key: E2E_ROWS / statistics.median(seconds) for key, seconds in timings.items()}
    rows_moved = E2E_ROWS * E2E_REPEATS / 1e6
    return {**rates, "standin_cpu_s_per_m_rows_source": standin_cpu["source"] / rows_moved,
            "standin_cpu_s_per_m_rows_sink": standin_cpu["sink"] / rows_moved}


def _query(spark: Any, kind: str, uri: str, embedded_uri: str, work: Path) -> float:
    """Seconds of one `availableNow` query: the queue at `uri` into `noop` (source), or the embedded queue into
    the table at `uri` (sink: the source's cost is the same for both backends)."""
    from streaming_core.cluster import connect

    read_uri = uri if kind == "source" else embedded_uri
    with connect(read_uri) as cluster:
        consumer = _consumer(cluster, "//bench/queue")
    reader = (spark.readStream.format("yt").option("cluster", read_uri).option("consumer_path", consumer)
              .load("//bench/queue"))
    writer = reader.writeStream.trigger(availableNow=True).option(
        "checkpointLocation", str(work / f"cp-{uuid.uuid4().hex[:8]}"))
    if kind == "source":
        writer = writer.format("noop")
    else:
        writer = writer.format("yt").option("cluster", uri).option("path", "//bench/out")
    started = time.perf_counter()
    writer.start().awaitTermination()
    return time.perf_counter() - started


def e2e_report(e2e: dict[str, float]) -> str:
    lines = [f"end to end, {E2E_ROWS:,} rows of the flat schema, {E2E_TABLETS} tablets, rows/s (wall clock, one "
             f"availableNow query, median of {E2E_REPEATS}):",
             f"{'path':<12}{'embedded':>14}{'stand-in':>14}{'ratio':>8}"]
    for kind in ("source", "sink"):
        embedded, standin = e2e[f"{kind} embedded"], e2e[f"{kind} stand-in"]
        lines.append(f"{kind:<12}{embedded:>14,.0f}{standin:>14,.0f}{standin / embedded:>8.2f}")
    lines.append(f"the stand-in's own CPU: {e2e['standin_cpu_s_per_m_rows_source']:.2f} s per million rows read, "
                 f"{e2e['standin_cpu_s_per_m_rows_sink']:.2f} s per million written (it shares the 2 cores); "
                 f"goal: source through the stand-in >= {E2E_GOAL:g} of the embedded path")
    return "\n".join(lines)


def e2e_summary(e2e: dict[str, float]) -> dict[str, Any]:
    return {
        "e2e_source_vs_embedded": round(e2e["source stand-in"] / e2e["source embedded"], 3),
        "e2e_sink_vs_embedded": round(e2e["sink stand-in"] / e2e["sink embedded"], 3),
        "e2e_goal": E2E_GOAL,
        "e2e_rows_per_s": {key: round(v) for key, v in e2e.items() if " " in key},
        "standin_cpu_s_per_m_rows_source": round(e2e["standin_cpu_s_per_m_rows_source"], 3),
        "standin_cpu_s_per_m_rows_sink": round(e2e["standin_cpu_s_per_m_rows_sink"], 3),
    }


if __name__ == "__main__":
    main()
