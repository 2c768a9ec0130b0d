"""Batch writes' pieces that need no Spark: the save-mode decision, a new table's YT schema from a Spark
schema, and the options that shape it."""

from __future__ import annotations

import re

import pytest
from pyspark.sql import types as T

from streaming_core.cluster import AlreadyExistsError, NodeInfo, SchemaError
from streaming_core.cluster.base import MAP_NODE, ORDERED, SORTED, STATIC, TABLE
from streaming_core.options import SinkOptions
from streaming_core.save_modes import CREATE, REPLACE, SKIP, WRITE, decide_save, new_table_attributes
from streaming_core.types import yt_schema

PATH = "//home/out"


def node(kind: str | None, node_type: str = TABLE) -> NodeInfo:
    return NodeInfo(PATH, node_type, kind)


class TestDecideSave:
    @pytest.mark.parametrize("mode", ["append", "overwrite", "errorifexists", "ignore"])
    def test_every_mode_creates_a_missing_table(self, mode):
        assert decide_save(PATH, mode, None).action == CREATE

    @pytest.mark.parametrize("mode, kind, action", [
        ("append", STATIC, WRITE), ("append", ORDERED, WRITE), ("append", SORTED, WRITE),
        ("overwrite", STATIC, REPLACE), ("ignore", STATIC, SKIP), ("ignore", ORDERED, SKIP),
    ])
    def test_an_existing_table(self, mode, kind, action):
        assert decide_save(PATH, mode, node(kind)).action == action

    @pytest.mark.parametrize("kind", [STATIC, ORDERED])
    def test_errorifexists_refuses_any_existing_table_naming_path_and_fixes(self, kind):
        with pytest.raises(AlreadyExistsError, match=r"//home/out: already exists .* errorifexists .* mode\('append"):
            decide_save(PATH, "errorifexists", node(kind))

    @pytest.mark.parametrize("kind", [ORDERED, SORTED])
    def test_overwrite_refuses_dynamic_tables(self, kind):
        with pytest.raises(SchemaError, match=f"replaces static tables only, and this is a {kind} table"):
            decide_save(PATH, "overwrite", node(kind))

    def test_a_map_node_at_the_path_is_refused(self):
        with pytest.raises(SchemaError, match="is a map_node, not a table"):
            decide_save(PATH, "append", node(None, MAP_NODE))


class TestYtSchema:
    def test_scalars_nullability_and_sort_columns(self):
        schema = T.StructType().add("v", "string").add("k", "long", False).add("d", "decimal(12,3)") \
            .add("b", "binary").add("day", "date", False)
        assert yt_schema(schema, type_v3=False, sort_columns=("k",)) == [
            {"name": "k", "type_v3": "int64", "sort_order": "ascending"},
            {"name": "v", "type_v3": {"type_name": "optional", "item": "string"}},
            {"name": "d", "type_v3": {"type_name": "optional", "item": {
                "type_name": "decimal", "precision": 12, "scale": 3}}},
            {"name": "b", "type_v3": "yson"},
            {"name": "day", "type_v3": "date"},
        ]

    def test_composites_are_yson_without_type_v3_and_typed_with_it(self):
        schema = T.StructType().add("l", T.ArrayType(T.IntegerType(), False), False) \
            .add("m", T.MapType(T.StringType(), T.DoubleType()), False) \
            .add("t", T.StructType().add("_1", "long", False).add("_2", "string"), False) \
            .add("v", T.StructType().add("_va", "long").add("_vb", "string"), False)
        assert [c["type_v3"] for c in yt_schema(schema, type_v3=False)] == ["yson"] * 4
        assert [c["type_v3"] for c in yt_schema(schema, type_v3=True)] == [
            {"type_name": "list", "item": "int32"},
            {"type_name": "dict", "key": "string", "value": {"type_name": "optional", "item": "double"}},
            {"type_name": "tuple", "elements": [{"type": "int64"}, {"type": {"type_name": "optional",
                                                                            "item": "string"}}]},
            {"type_name": "variant", "members": [{"name": "a", "type": "int64"}, {"name": "b", "type": "string"}]},
        ]

    def test_every_column_without_a_yt_type_is_named(self):
        schema = T.StructType().add("ok", "long").add("took", T.DayTimeIntervalType()) \
            .add("months", T.YearMonthIntervalType())
        with pytest.raises(SchemaError, match=r"columns with no YT type: took \(.*\), months \("):
            yt_schema(schema, type_v3=True)

    @pytest.mark.parametrize("type_v3", [True, False])
    def test_a_composite_sort_column_is_named(self, type_v3):
        schema = T.StructType().add("a", T.ArrayType(T.LongType())).add("b", "long")
        with pytest.raises(SchemaError, match=r"sort columns \['a'\] are composite or YSON"):
            yt_schema(schema, type_v3=type_v3, sort_columns=("a", "b"))

    def test_an_unknown_sort_column_is_named(self):
        with pytest.raises(SchemaError, match=r"sort columns \['nope'\] are not columns of the DataFrame \['a'\]"):
            yt_schema(T.StructType().add("a", "long"), type_v3=False, sort_columns=("nope",))


class TestNewTableOptions:
    def options(self, **given: str) -> SinkOptions:
        return SinkOptions.parse({"path": PATH, "cluster": "local:///tmp/x", **given}, {})

    @pytest.mark.parametrize("given, keys", [('["b", "a"]', ["b", "a"]), ("b, a", ["b", "a"])])
    def test_sort_columns_take_spyt_json_or_a_comma_list(self, given, keys):
        attributes = new_table_attributes(self.options(sort_columns=given, optimize_for="LOOKUP"),
                                          T.StructType().add("a", "long").add("b", "long"))
        assert [c["name"] for c in attributes["schema"] if c.get("sort_order")] == keys
        assert attributes["optimize_for"] == "lookup"

    @pytest.mark.parametrize("given, message", [
        ({"optimize_for": "speed"}, "option 'optimize_for' must be one of ['lookup', 'scan']"),
        ({"save_mode": "upsert"}, "option 'save_mode' must be one of"),
        ({"sort_columns": '["a", 1]'}, "option 'sort_columns' must list column names"),
        ({"sort_columns": "[oops"}, "option 'sort_columns': invalid JSON list"),
    ])
    def test_bad_values_name_the_option(self, given, message):
        with pytest.raises(ValueError, match=re.escape(message)):
            self.options(**given)

    def test_unique_keys_is_refused_by_name(self):
        with pytest.raises(SchemaError, match="option 'unique_keys' is not supported yet"):
            new_table_attributes(self.options(unique_keys="True"), T.StructType().add("a", "long"))
