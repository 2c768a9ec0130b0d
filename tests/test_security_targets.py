"""A pipeline acts on its own data only: what a heal may move comes from the config or the command line, never
from a checkpoint's content, and two queries of one config never share a consumer or a checkpoint (issue 32)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from opsd.cli.main import main
from opsd.config.load import ConfigError, load_config
from streaming_core.cluster import connect
from tests.support.checkpoint import write_checkpoint
from tests.support.cluster import make_queue

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(60)]

#: A pipeline without a checkpoint: a config needs one.
RATE_TO_CONSOLE = {"name": "other", "source": {"format": "rate"}, "sink": {"format": "console"}}


@pytest.fixture
def other_team(yt, yt_root: str) -> tuple[str, str]:
    """Another team's queue of 1,000 unread rows (500 per partition) and its consumer, at 0."""
    queue, consumer = f"{yt_root}/their_queue", f"{yt_root}/their_consumer"
    make_queue(yt, queue, consumer=consumer)
    yt.insert_rows(queue, [{"data": "secret", "n": i} for i in range(1000)])
    return queue, consumer


def crafted(location: Path, queue: str, consumer: str) -> str:
    """A checkpoint whose committed offsets sit at the other team's queue end and name its consumer: it looks idle."""
    write_checkpoint(location, queue, {0: {0: 249, 1: 249}, 1: {0: 499, 1: 499}}, committed=1, consumer=consumer)
    return str(location)


def test_a_heal_by_checkpoint_without_consumer_is_refused_and_moves_nothing(
        yt, other_team, cluster_uri: str, tmp_path: Path, capsys) -> None:
    queue, consumer = other_team
    location = crafted(tmp_path / "cp", queue, consumer)

    assert main(["desync", "heal", "--cluster", cluster_uri, "--checkpoint", location, "--queue", queue]) == 1
    assert "--consumer" in capsys.readouterr().err
    assert yt.get_consumer_offsets(consumer, queue) == {}


def test_a_watch_without_consumer_is_read_only_evidence_never_healed(
        yt, other_team, cluster_uri: str, tmp_path: Path, capsys) -> None:
    queue, consumer = other_team
    path = tmp_path / "opsd.yaml"
    path.write_text(json.dumps({"cluster": cluster_uri, "pipelines": [RATE_TO_CONSOLE],
                                "watch": [{"name": "mine", "checkpoint_location": crafted(tmp_path / "cp", queue,
                                                                                          consumer)}]}))

    assert main(["desync", "heal", "mine", "--config", str(path)]) == 1
    assert "watch: consumer in" in capsys.readouterr().err
    assert yt.get_consumer_offsets(consumer, queue) == {}


def test_a_checkpoint_naming_another_consumer_is_a_finding_not_a_target(
        yt, yt_root: str, other_team, cluster_uri: str, tmp_path: Path, capsys) -> None:
    queue, consumer = other_team
    mine = f"{yt_root}/my_consumer"

    assert main(["desync", "heal", "--cluster", cluster_uri, "--checkpoint", crafted(tmp_path / "cp", queue, consumer),
                 "--queue", queue, "--consumer", mine]) == 1
    out = capsys.readouterr().out
    assert "refused: the checkpoint does not match this queue" in out
    assert f"name another consumer than the configured {mine}" in out
    assert consumer not in out
    assert yt.get_consumer_offsets(consumer, queue) == {}


@pytest.mark.parametrize(("named", "says"), [
    ({}, "'queue' and 'consumer'"), ({"queue": "//q"}, "'consumer'"), ({"consumer": "//c"}, "'queue'")])
def test_a_watch_that_heals_needs_its_queue_and_consumer(tmp_path: Path, named: dict, says: str) -> None:
    path = tmp_path / "opsd.yaml"
    path.write_text(json.dumps({"pipelines": [RATE_TO_CONSOLE],
                                "watch": [{"name": "w", "checkpoint_location": "/cp", "heal": True, **named}]}))

    with pytest.raises(ConfigError, match=re.escape(f"watch 'w': heal: true needs {says} (")):
        load_config(path)


def test_a_heal_by_checkpoint_without_queue_is_refused_and_moves_nothing(
        yt, yt_root: str, cluster_uri: str, tmp_path: Path, capsys) -> None:
    """My consumer reads two queues; a crafted checkpoint of one query names the other queue, at its end: healing
    by the checkpoint's queue would skip that queue's unread rows for my other query."""
    mine, other = f"{yt_root}/my_queue", f"{yt_root}/my_other_queue"
    consumer = f"{yt_root}/my_consumer"
    make_queue(yt, mine, consumer=consumer)
    make_queue(yt, other)
    yt.register_queue_consumer(other, consumer)
    yt.insert_rows(other, [{"data": "unread", "n": i} for i in range(1000)])

    assert main(["desync", "heal", "--cluster", cluster_uri, "--checkpoint", crafted(tmp_path / "cp", other, consumer),
                 "--consumer", consumer]) == 1
    assert "--queue" in capsys.readouterr().err
    assert yt.get_consumer_offsets(consumer, other) == {}


def yt_pipeline(name: str, consumer: str, checkpoint: str) -> dict:
    return {"name": name, "source": {"path": "//q", "options": {"consumer_path": consumer}},
            "sink": {"format": "console"}, "checkpoint_location": checkpoint}


@pytest.mark.parametrize(("b_consumer", "b_checkpoint", "says"), [
    ("//home/a/consumer/", "/cp/b", "a and b share the consumer //home/a/consumer"),
    ("//home/b/consumer", "file:///cp/a/", "a and b share the checkpoint location /cp/a"),
])
def test_two_pipelines_sharing_a_consumer_or_a_checkpoint_are_refused_naming_both(
        tmp_path: Path, b_consumer: str, b_checkpoint: str, says: str) -> None:
    """The issue's second reproduction: pipeline B planned rows 150-200 after A acknowledged 0-149 of their shared
    consumer, so B never read 0-149. Such a config is refused before anything starts."""
    path = tmp_path / "opsd.yaml"
    path.write_text(json.dumps({"pipelines": [yt_pipeline("a", "//home/a/consumer", "/cp/a"),
                                              yt_pipeline("b", b_consumer, b_checkpoint)]}))

    with pytest.raises(ConfigError, match=re.escape(says)):
        load_config(path)


def test_a_watch_sharing_a_pipelines_consumer_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "opsd.yaml"
    path.write_text(json.dumps({"pipelines": [yt_pipeline("a", "//c", "/cp/a")],
                                "watch": [{"name": "w", "checkpoint_location": "/cp/w", "consumer": "//c"}]}))

    with pytest.raises(ConfigError, match="a and w share the consumer //c"):
        load_config(path)


def test_removing_a_querys_producer_sessions_leaves_another_querys_whose_name_it_begins(
        cluster_uri: str, yt_root: str, capsys) -> None:
    """Query A names its sessions `app` (`app-p0`), query B `app-p0` (`app-p0-p0`, `app-p0-t1`): removing A's must not
    remove B's, whose next push would then start over without its sequence numbers (duplicate rows)."""
    producer, queue = f"{yt_root}/producer", f"{yt_root}/queue"
    assert main(["producer", "create", producer, "--cluster", cluster_uri]) == 0
    with connect(cluster_uri) as yt:
        yt.create("table", queue, attributes={"dynamic": True, "schema": [{"name": "data", "type": "string"}]})
        for session in ("app-p0", "app-t3", "app-p0-p0", "app-p0-t1", "app-other"):
            yt.create_queue_producer_session(producer, queue, session)

    assert main(["producer", "remove-sessions", producer, queue, "--session", "app", "--cluster", cluster_uri]) == 0
    assert "removed 2 session(s)" in capsys.readouterr().out
    with connect(cluster_uri) as yt:
        assert sorted(r["session_id"] for r in yt.select_rows(producer)) == ["app-other", "app-p0-p0", "app-p0-t1"]
