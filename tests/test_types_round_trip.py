"""Every YT type through the source and the sink on real Spark: one table with a column per type
(`tests/support/yt_types.py`), read once and written once per mode, so the suite pays for a few Spark queries only."""

from __future__ import annotations

import pytest

from opsd.cli.json_values import row_decoder
from opsd.cli.table import table_batches
from streaming_core.cluster import Cluster, TableSchema
from tests.support.yt_types import TYPES

pytestmark = pytest.mark.spark

SCHEMA = [{"name": "i", "type": "int64", "required": True}] + [
    {"name": t.column, "type_v3": t.type_v3} for t in TYPES]
ROW_COUNT = max(len(t.values) for t in TYPES)


def all_types_table(yt: Cluster, path: str, *, queue: bool = False) -> list[dict]:
    """A static table (or a queue) holding every type's values (cycled over `ROW_COUNT` rows); returns what
    it stores."""
    yt.create("table", path, recursive=True, attributes={"schema": SCHEMA, "dynamic": queue})
    decode = row_decoder(TableSchema.from_yt(SCHEMA))
    rows = [decode({"i": i, **{t.column: t.values[i % len(t.values)][0] for t in TYPES}}) for i in range(ROW_COUNT)]
    if queue:
        yt.insert_rows(path, rows)
    else:
        yt.write_table(path, rows)
    return stored(yt, path)


def stored(yt: Cluster, path: str) -> list[dict]:
    rows = (r for b in table_batches(yt, path, yt.node_info(path).kind, None) for r in b.to_pylist())
    return sorted(rows, key=lambda r: r["i"])


@pytest.mark.parametrize("type_v3", [True, False], ids=["type_v3", "yson"])
def test_every_type_is_read_and_written_back_unchanged(spark, yt, yt_root, type_v3):
    """Typed composites (`parsing_type_v3` / `write_type_v3`) from a static table, or YSON ones (both off,
    SPYT's default) from a queue."""
    original = all_types_table(yt, f"{yt_root}/in", queue=not type_v3)
    yt.create("table", f"{yt_root}/out", attributes={"schema": SCHEMA})
    flag = str(type_v3).lower()
    df = spark.read.option("parsing_type_v3", flag).yt(f"{yt_root}/in")
    df.write.option("write_type_v3", flag).mode("append").yt(f"{yt_root}/out")
    assert stored(yt, f"{yt_root}/out") == original


def test_a_table_made_from_the_dataframe_reads_back_the_same(spark, yt, yt_root):
    all_types_table(yt, f"{yt_root}/in")
    df = spark.read.option("parsing_type_v3", "true").yt(f"{yt_root}/in")
    df.write.option("write_type_v3", "true").yt(f"{yt_root}/copy")
    made = {c.name: c.type_v3 for c in yt.get_schema(f"{yt_root}/copy").columns}
    assert made["c_optional"] == {"type_name": "optional", "item": "int64"}  # nullable Spark fields are optional
    assert made["c_variant_struct"] == {"type_name": "variant", "members": [
        {"name": "num", "type": "int64"}, {"name": "text", "type": "string"}]}
    assert made["c_tuple"]["type_name"] == "tuple"
    assert made["c_dict"]["type_name"] == "dict"
    assert made["c_uint8"] == "int16"  # Spark has no unsigned types
    assert made["c_yson"] == "yson"
    copy = spark.read.option("parsing_type_v3", "true").yt(f"{yt_root}/copy")
    assert sorted(copy.collect()) == sorted(df.collect())
