"""`wire.yson_columns`: binary YSON rows read column by column with numpy, as the object path reads them.

Each case decodes the same bytes (as a proxy writes them: `encode_wire(binary_yson=True)`) both ways:
`yson_columns.decode_columns` (which must take them, not decline) and
`decode_objects` (the bindings' Python objects, the reference); the tables must be equal, and equal to what was
written. Bytes the column reader declines (text YSON, key orders that change between rows, very long lists) must
still read through `decode_wire`, and damaged bytes must fail or read exactly as the object path fails or reads.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
import yt.yson as yson

from streaming_core.cluster import SchemaError, TableSchema
from streaming_core.cluster.schema import to_arrow_table
from streaming_core.cluster.ytsaurus import wire
from streaming_core.cluster.ytsaurus.wire import bindings, decode_objects, decode_wire, encode_wire, yson_columns
from tests.support.wire_cases import (
    ROUND_TRIPS,
    dict_type,
    list_type,
    one_column,
    optional,
    struct_type,
    wide_rows,
    wide_schema,
)


def same(a: pa.Table | pa.ChunkedArray, b: pa.Table | pa.ChunkedArray) -> bool:
    """Equal types and values, NaN equal to NaN and -0.0 unequal to 0.0 (compared by their Python repr), or
    equal by Arrow where values have no Python form (a date out of Python's range)."""
    if isinstance(a, pa.Table):
        return a.schema == b.schema and all(same(x, y) for x, y in zip(a.columns, b.columns, strict=True))
    try:
        return a.type == b.type and repr(a.to_pylist()) == repr(b.to_pylist())
    except (OverflowError, ValueError):
        return a.equals(b)


def proxy_bytes(schema: TableSchema, table: pa.Table) -> bytes:
    """Rows as a proxy (and the stand-in) sends them: binary YSON, `yson` values included."""
    return encode_wire(schema, table, binary_yson=True)


def columns_of(schema: TableSchema, service: tuple[str, ...] = ()) -> tuple[list[pa.Field], dict]:
    fields = [*(pa.field(n, pa.int64(), nullable=False) for n in service), *schema.arrow_schema()]
    return fields, {c.name: c.type_v3 for c in schema.columns}


def column_wise(schema: TableSchema, raw: bytes, service: tuple[str, ...] = ()) -> pa.Table:
    """The column reader's table (it must not decline), checked against the object path's."""
    fields, types = columns_of(schema, service)
    arrays = yson_columns.decode_columns(raw, [(f.name, types.get(f.name, "int64"), f.type) for f in fields])
    table = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    reference = decode_objects(raw, fields, types)
    assert same(table, reference), (table.to_pylist()[:3], reference.to_pylist()[:3])
    return table


def declined(schema: TableSchema, raw: bytes) -> bool:
    fields, types = columns_of(schema)
    try:
        yson_columns.decode_columns(raw, [(f.name, types[f.name], f.type) for f in fields])
    except yson_columns.Declined:
        return True
    return False


@pytest.mark.parametrize("type_v3, values", ROUND_TRIPS.values(), ids=ROUND_TRIPS.keys())
def test_every_type_is_read_column_wise_as_written_with_nulls_between(type_v3, values):
    schema = TableSchema.from_yt([{"name": "c", "type_v3": optional(type_v3)}, {"name": "n", "type_v3": "int64"}])
    rows = [{"c": v, "n": i} for i, v in enumerate([*values, None, *values, None])]
    written = to_arrow_table(schema, rows, "//t")

    assert column_wise(schema, proxy_bytes(schema, written)).equals(written)


def test_wide_rows_of_every_kind_are_read_column_wise_as_written():
    schema = wide_schema()
    written = to_arrow_table(schema, wide_rows(500), "//t")
    back = column_wise(schema, proxy_bytes(schema, written))

    for name in schema.names:
        if name != "meta":  # yson: the bindings' text form of the same value (below)
            assert same(back.column(name), written.column(name)), name
    assert [None if v is None else yson.loads(v) for v in back.column("meta").to_pylist()] == [
        None if v is None else yson.loads(v) for v in written.column("meta").to_pylist()]


@pytest.mark.parametrize("longest", [2, 3, 4, 5, 8, 10])
def test_integers_of_every_varint_length_up_to_the_longest_are_read_as_written(longest):
    """Every value of a column within 4 varint bytes takes a shorter path than one with longer values, and all
    of 9 or 10 bytes another: the values at each length's edges, up to `longest` bytes, both signs, the string
    lengths beside them, and columns of 9 and of 10 bytes only."""
    edges = [v for n in range(1, longest) for v in (2 ** (7 * n) - 1, 2 ** (7 * n))]
    ints = [x for v in edges for x in (v // 2, -(v // 2) - 1)]
    schema = TableSchema.from_yt([{"name": "i", "type_v3": "int64"}, {"name": "u", "type_v3": "uint64"},
                                  {"name": "s", "type_v3": "string"}, {"name": "nine", "type_v3": "uint64"},
                                  {"name": "ten", "type_v3": "uint64"}])
    rows = [{"i": i, "u": u, "s": "x" * (u % 300), "nine": 2**56 + u % 2**56, "ten": 2**63 + u % 2**63}
            for i, u in zip(ints, edges * 2, strict=True)]
    written = to_arrow_table(schema, rows, "//t")

    assert column_wise(schema, proxy_bytes(schema, written)).equals(written)


@pytest.mark.parametrize("lengths", [[3, 3, 0, None, 3], [1, None, 1, 0], [2, 3, 0, None, 1], [0, None],
                                     [2, 3, 1], [3, 3]])
def test_lists_of_as_many_items_in_every_row_and_of_differing_counts_are_read_as_written(lengths):
    schema = one_column(optional(dict_type("utf8", list_type("int64"))))
    rows = [{"c": None if n is None else [(f"k{j}", list(range(r + j))) for j in range(n)]}
            for r, n in enumerate(lengths * 3)]
    written = to_arrow_table(schema, rows, "//t")

    assert column_wise(schema, proxy_bytes(schema, written)).equals(written)


@pytest.mark.parametrize("key", ["string", "utf8"])
def test_dict_keys_the_same_in_every_row_differing_and_long_are_read_as_written(key):
    schema = one_column(optional(dict_type(key, "int64")))
    keys = ["a", "", "ключ", "a key longer than fourteen bytes"]
    rows = [{"c": [(k, i) for k in keys] + [(f"k{i % 3}", -i)]} for i in range(7)] + [{"c": None}, {"c": []}]
    written = to_arrow_table(schema, rows, "//t")

    assert column_wise(schema, proxy_bytes(schema, written)).equals(written)


def test_a_dict_key_not_utf8_the_same_in_every_row_names_its_column_as_the_object_path_does():
    schema = one_column(dict_type("utf8", "int64"))
    raw = proxy_bytes(one_column(dict_type("string", "int64")),
                      pa.table({"c": pa.array([[(b"\xff", 1)]] * 3, pa.map_(pa.binary(), pa.int64()))}))

    assert declined(schema, raw)
    with pytest.raises(SchemaError, match="'c'"):
        decode_wire(schema, raw)


def test_yson_values_read_as_the_bindings_write_them_in_text_with_attributes():
    schema = one_column(optional("yson"))
    values = [b"<a=1;b=[x;2u]>%true", b"{k=#;s=\"\\x00\\n\"}", b"-7", b"#", None, b"[1;-2.5;{};[]]"]
    raw = proxy_bytes(schema, pa.table({"c": pa.array(values, pa.binary())}))

    assert column_wise(schema, raw).column("c").to_pylist() == [
        None if v in (None, b"#") else yson.dumps(yson.loads(v)) for v in values]


def shaped(rng: random.Random, depth: int = 0) -> Callable[[random.Random], Any]:
    """A random shape of `yson` value: a function giving values of that shape with their own leaves (strings
    plain, empty, to escape or non-ASCII; integers negative and big, uint64 to 2^64 - 1; doubles incl. nan
    and infinities; booleans, entity, attributes; maps of fixed keys and lists of fixed length)."""
    kind = rng.randrange(13 if depth < 3 else 9)
    leaves: list[Callable[[random.Random], Any]] = [
        lambda r: r.randrange(-2**63, 2**63), lambda r: r.choice([0, -1, 7, 2**63 - 1, -2**63]),
        lambda r: yson.YsonUint64(r.choice([0, 5, 2**63, 2**64 - 1, r.randrange(2**64)])),
        lambda r: r.choice([0.5, -0.0, 1e300, 1e-7, float("nan"), float("inf"), -float("inf"), r.random()]),
        lambda r: bytes(r.randrange(0x20, 0x7F) for _ in range(r.choice([0, 1, 5, 30]))),
        lambda r: bytes(r.randrange(256) for _ in range(r.choice([1, 4]))),
        lambda r: "é€".encode(), lambda r: r.random() < 0.5, lambda r: None]
    if kind < len(leaves):
        return leaves[kind]
    if kind == 9:
        constant = rng.choice([b"", b"same", b'q"uote\\', b"\x00\n"])
        return lambda r: constant
    if kind == 10:
        items = [shaped(rng, depth + 1) for _ in range(rng.randrange(4))]
        return lambda r: [item(r) for item in items]
    if kind == 11:
        members = {bytes(rng.choice(b"abk\n") for _ in range(rng.randrange(1, 9))): shaped(rng, depth + 1)
                   for _ in range(rng.randrange(4))}
        return lambda r: {key: member(r) for key, member in members.items()}
    inner = shaped(rng, depth + 1)
    return lambda r: yson.to_yson_type(inner(r), attributes={"a": 1}) if r.random() < 0.9 else inner(r)


def test_yson_values_of_one_shape_and_of_many_read_as_the_bindings_write_them():
    """Property-style: columns of generated values (one shape a column, or shapes mixed) read column-wise as the
    object path reads them (the bindings' parse + dump of each value), through the template writer where the
    values share a shape and hold only what it writes, else through the bindings."""
    schema = one_column(optional("yson"))
    rng = random.Random(35)
    templated = 0
    for case in range(250):
        shapes = [shaped(rng) for _ in range(1 if case % 5 else 3)]
        values = [None if rng.random() < 0.1 else yson.dumps(rng.choice(shapes)(rng), yson_format="binary")
                  for _ in range(rng.randrange(1, 40))]
        raw = proxy_bytes(schema, pa.table({"c": pa.array(values, pa.binary())}))
        before = yson_columns_dumped_calls(raw, schema)
        back = column_wise(schema, raw).column("c").to_pylist()

        assert back == [None if v in (None, b"#") else bindings.dumps(bindings.loads(
            v, always_create_attributes=False, encoding=None)) for v in values]
        templated += not before
    assert templated > 50


def yson_columns_dumped_calls(raw: bytes, schema: TableSchema) -> int:
    """How many times the column reader parses and dumps `yson` values through the bindings for `raw`."""
    calls = []
    original = yson_columns._dumped
    yson_columns._dumped = lambda *args: calls.append(args) or original(*args)
    try:
        fields, types = columns_of(schema)
        yson_columns.decode_columns(raw, [(f.name, types[f.name], f.type) for f in fields])
    finally:
        yson_columns._dumped = original
    return len(calls)


def test_yson_strings_to_escape_in_values_of_one_shape_are_read_without_the_bindings_parse():
    schema = one_column(optional("yson"))
    values = [yson.dumps({"name": f"имя {i}\t\"q\"", "n": i}, yson_format="binary") for i in range(20)]
    raw = proxy_bytes(schema, pa.table({"c": pa.array(values, pa.binary())}))

    assert yson_columns_dumped_calls(raw, schema) == 0
    assert column_wise(schema, raw).column("c").to_pylist() == [
        bindings.dumps(bindings.loads(v, always_create_attributes=False, encoding=None)) for v in values]


def test_a_map_with_a_key_twice_reads_as_the_bindings_read_it():
    value = b"{\x01\x02a=\x02\x02;\x01\x02b=\x02\x04;\x01\x02a=\x02\x06;}"
    raw = b"".join(b"{\x01\x02c=" + value + b";};" for _ in range(3))
    schema = one_column(optional("yson"))

    assert column_wise(schema, raw).column("c").to_pylist() == [b'{"a"=3;"b"=2;}'] * 3


def test_yson_values_without_the_last_semicolon_read_as_the_bindings_write_them():
    value = b"{\x01\x02a=[\x02\x02;\x02\x04]}"
    raw = b"".join(b"{\x01\x02c=" + value + b"};" for _ in range(3))

    assert column_wise(one_column(optional("yson")), raw).column("c").to_pylist() == [b'{"a"=[1;2;];}'] * 3


def test_service_columns_and_system_columns_the_schema_lacks_are_read_by_name():
    schema = TableSchema.from_yt([{"name": "a", "type_v3": "int64"}, {"name": "b", "type_v3": optional("utf8")}])
    rows = [{"$tablet_index": 2, "$row_index": 10 + i, "$timestamp": yson.YsonUint64(2**62 + i),
             "a": i, "b": None if i % 2 else str(i)} for i in range(50)]
    raw = yson.dumps(rows, yson_type="list_fragment", yson_format="binary")

    back = column_wise(schema, raw, ("$tablet_index", "$row_index"))

    assert back.column("$row_index").to_pylist() == list(range(10, 60))
    assert back.column("b").to_pylist()[:2] == ["0", None]


def test_struct_members_left_out_read_as_null():
    schema = one_column(struct_type(x="int64", y=optional("utf8"), z=optional("double")))
    raw = yson.dumps([{"c": {"x": 1, "z": 0.5}}, {"c": {"x": 2, "y": "b"}}, {"c": {"x": 3}}],
                     yson_type="list_fragment", yson_format="binary")

    assert column_wise(schema, raw).column("c").to_pylist() == [
        {"x": 1, "y": None, "z": 0.5}, {"x": 2, "y": "b", "z": None}, {"x": 3, "y": None, "z": None}]


def test_a_row_start_inside_a_string_is_not_taken_for_a_row():
    schema = TableSchema.from_yt([{"name": "id", "type_v3": "int64"}, {"name": "s", "type_v3": "string"}])
    trap = ';{\x01\x04id=\x02\x02;\x01\x02s=\x01\x00};'
    written = to_arrow_table(schema, [{"id": i, "s": trap * (i % 2)} for i in range(20)], "//t")

    assert decode_wire(schema, encode_wire(schema, written)).equals(written)


@pytest.mark.parametrize("case", ["text yson", "keys reordered between rows", "attributes on a row",
                                  "a list longer than MAX_ROUNDS", "a struct's members out of order"])
def test_bytes_the_column_reader_declines_read_through_the_object_path(case, monkeypatch):
    monkeypatch.setattr(yson_columns, "MAX_ROUNDS", 8)
    schema = TableSchema.from_yt([{"name": "a", "type_v3": "int64"}, {"name": "l", "type_v3": list_type("int64")},
                                  {"name": "p", "type_v3": struct_type(x="int64", y="int64")}])
    rows = [{"a": i, "l": [i], "p": {"x": i, "y": -i}} for i in range(5)]
    fmt = "binary"
    if case == "text yson":
        fmt = "text"
    elif case == "keys reordered between rows":
        rows[3] = {"l": [3], "a": 3, "p": {"x": 3, "y": -3}}
    elif case == "attributes on a row":
        rows[2] = yson.to_yson_type(rows[2], attributes={"x": 1})
    elif case == "a list longer than MAX_ROUNDS":
        rows[1]["l"] = list(range(yson_columns.MAX_ROUNDS + 1))
    else:
        rows[4]["p"] = {"y": -4, "x": 4}
    raw = yson.dumps(rows, yson_type="list_fragment", yson_format=fmt)

    assert declined(schema, raw)
    assert decode_wire(schema, raw).to_pylist() == [
        {"a": r["a"], "l": r["l"], "p": {"x": r["p"]["x"], "y": r["p"]["y"]}} for r in rows]


def test_a_value_of_the_wrong_type_still_names_its_column():
    schema = one_column("int64")
    raw = yson.dumps([{"c": 1}, {"c": "two"}], yson_type="list_fragment", yson_format="binary")

    assert declined(schema, raw)
    with pytest.raises(SchemaError, match="column 'c'"):
        decode_wire(schema, raw)


def outcome(decode, *args) -> pa.Table | str:
    try:
        return decode(*args)
    except (SchemaError, yson.YsonError) as e:
        return type(e).__name__


@pytest.mark.hostile
def test_damaged_bytes_fail_or_read_exactly_as_the_object_path_reads_them():
    """Byte flips, cuts and insertions anywhere in wide rows: never an unexplained error, never other values."""
    schema = wide_schema()
    damage_reads_as_the_object_path(schema, proxy_bytes(schema, to_arrow_table(schema, wide_rows(12), "//t")))


@pytest.mark.hostile
def test_damaged_yson_values_of_one_shape_fail_or_read_exactly_as_the_object_path_reads_them():
    """The same for a `yson` column whose values the template writer reads (one shape, every token kind)."""
    schema = TableSchema.from_yt([{"name": "k", "type_v3": "int64"}, {"name": "meta", "type_v3": optional("yson")}])
    meta = [b'{source=bench;n=%d;u=%du;ok=%%true;l=[1;"x%d";#]}' % (i, 7 * i, i) for i in range(12)]
    raw = proxy_bytes(schema, pa.table({"k": pa.array(range(12), pa.int64()), "meta": pa.array(meta, pa.binary())}))

    assert yson_columns_dumped_calls(raw, schema) == 0
    damage_reads_as_the_object_path(schema, raw)


def damage_reads_as_the_object_path(schema: TableSchema, raw: bytes) -> None:
    fields, types = columns_of(schema)
    rng = random.Random(35)
    for _ in range(150):
        damaged = bytearray(raw)
        at = rng.randrange(len(raw))
        kind = rng.randrange(3)
        if kind == 0:
            damaged[at] = rng.randrange(256)
        elif kind == 1:
            del damaged[at:]
        else:
            damaged[at:at] = bytes([rng.randrange(256)])
        damaged = bytes(damaged)

        read = outcome(decode_wire, schema, damaged)
        reference = outcome(decode_objects, damaged, fields, types)
        assert read == reference if isinstance(reference, str) else same(read, reference), (kind, at)


def test_rows_pulled_and_selected_through_the_standin_are_read_column_wise(standin_cluster, monkeypatch):
    """The real client against the stand-in (which writes rows as YTsaurus' schemaful writer does): the reads of
    the source (`pull_consumer`) and of the byte-cap probe (`select_rows`) never fall back to the object path."""
    schema = wide_schema()
    queue, consumer = "//wire/queue", "//wire/consumer"
    standin_cluster.create("table", queue, recursive=True,
                           attributes={"dynamic": True, "tablet_count": 1, "schema": schema.to_yt()})
    standin_cluster.create_consumer(consumer, recursive=True)
    standin_cluster.register_queue_consumer(queue, consumer)
    written = to_arrow_table(schema, wide_rows(60), queue)
    standin_cluster.insert_rows(queue, written, tablet_index=0)
    fallbacks = []
    monkeypatch.setattr(wire, "decode_objects", lambda *args: fallbacks.append(args))

    pulled = standin_cluster.pull_consumer(consumer, queue, 0, 0, max_row_count=100)
    picked = standin_cluster.read_rows_at(queue, 0, [3, 59])

    assert fallbacks == []
    assert pulled.column("$row_index").to_pylist() == list(range(60))
    assert same(pulled.select(["k", "u", "d", "price", "counts", "which", "id"]),
                written.select(["k", "u", "d", "price", "counts", "which", "id"]))
    assert picked.column("k").to_pylist() == [written.column("k")[3].as_py(), written.column("k")[59].as_py()]
