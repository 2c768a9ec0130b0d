"""The one YSON-to-Python conversion (`streaming_core.cluster.yson_values.plain`), for node values and attributes of
the YTsaurus backend and the stand-in as for the connector's YSON-encoded composite columns."""

from __future__ import annotations

import pyarrow as pa
from yt import yson

from streaming_core.cluster.yson_values import plain
from streaming_core.types import from_yson


def test_yson_types_become_plain_python() -> None:
    converted = plain(yson.loads(b'{a=%true; b=#; c=[1; 2.5; "x"]; d={e=3u}; f=<tag=1>"g"}'))

    assert converted == {"a": True, "b": None, "c": [1, 2.5, "x"], "d": {"e": 3}, "f": "g"}  # attributes dropped
    assert type(converted) is dict and type(converted["c"]) is list and type(converted["d"]) is dict
    assert type(converted["a"]) is bool
    assert [type(v) for v in converted["c"]] == [int, float, str]
    assert type(converted["d"]["e"]) is int and type(converted["f"]) is str


def test_bytes_are_text_and_undecodable_bytes_survive() -> None:
    assert plain({b"k": b"caf\xc3\xa9"}) == {"k": "café"}
    assert plain(b"\xff").encode("utf-8", errors="surrogateescape") == b"\xff"


def test_a_boolean_member_of_a_yson_encoded_struct_reads_as_a_boolean() -> None:
    target = pa.struct([("ok", pa.bool_()), ("n", pa.int64())])
    values = from_yson([yson.dumps({"ok": True, "n": 5}, yson_format="binary"), None], target)

    assert values.to_pylist() == [{"ok": True, "n": 5}, None]
