"""`opsd producer`: create a producer, inspect its sessions, remove a deleted query's."""

from __future__ import annotations

import json

from opsd.cli import main
from streaming_core.cluster import connect
from streaming_core.options import SinkOptions
from streaming_core.sink_producer import SEQUENCE_STRIDE, session_prefix


def test_create_inspect_and_remove_sessions(cluster_uri: str, yt_root: str, capsys) -> None:
    producer, queue = f"{yt_root}/producer", f"{yt_root}/queue"
    assert main(["producer", "create", producer, "--cluster", cluster_uri]) == 0
    with connect(cluster_uri) as yt:
        yt.create("table", queue, attributes={"dynamic": True, "schema": [{"name": "data", "type": "string"}]})
        prefix = session_prefix(SinkOptions(path=queue, cluster=cluster_uri, checkpoint_location="/ckpt/q1"))
        yt.create_queue_producer_session(producer, queue, f"{prefix}-p0", {"batch_id": 2})
        yt.push_queue_producer(producer, queue, f"{prefix}-p0", 0, [{"data": "x"}],
                               sequence_number=2 * SEQUENCE_STRIDE + 6)
        yt.create_queue_producer_session(producer, queue, "other-p0")
    capsys.readouterr()

    assert main(["producer", "inspect", producer, "--cluster", cluster_uri]) == 0
    text = capsys.readouterr().out
    assert f"session {prefix}-p0  epoch 0  last row {2 * SEQUENCE_STRIDE + 6} (batch 2 row 6)" in text
    assert "session other-p0  epoch 0  nothing written" in text

    assert main(["producer", "inspect", producer, "--queue", queue, "--json", "--cluster", cluster_uri]) == 0
    shown = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert shown[0]["user_meta"] == {"batch_id": 2} and {s["session"] for s in shown} == {f"{prefix}-p0", "other-p0"}

    assert main(["producer", "remove-sessions", producer, queue, "--checkpoint", "/ckpt/q1",
                 "--cluster", cluster_uri]) == 0
    assert f"removed 1 session(s) of {queue}" in capsys.readouterr().out
    with connect(cluster_uri) as yt:
        assert [r["session_id"] for r in yt.select_rows(producer)] == ["other-p0"]
