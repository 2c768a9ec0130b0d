"""Every CLI command that moves a consumer, ten times in a row, through the stand-in's balancer with three proxies
behind it (each keeping its own tablet transactions, as YTsaurus' HTTP proxies do): `opsd consumer seek` in all its
forms and `opsd desync heal`. No Spark: hand-made checkpoints."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from opsd.cli.main import main
from streaming_core.cluster import Cluster
from tests.support.checkpoint import job_with_checkpoint
from tests.support.doctor import follow, write_config
from tests.support.standin import STANDIN_TOKEN
from ytsaurus_standin import StandinProxy

TIMES = 10
#: A pipeline without a checkpoint: a config needs one, `desync` has nothing to say about it.
RATE_TO_CONSOLE = {"name": "other", "source": {"format": "rate"}, "sink": {"format": "console"}}


@pytest.fixture
def root(standin_cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh directory on the stand-in; `opsd` finds the token where users keep it."""
    monkeypatch.setenv("YT_TOKEN", STANDIN_TOKEN)
    path = f"//tmp/cli{uuid.uuid4().hex[:12]}"
    standin_cluster.create("map_node", path, recursive=True)
    return path


@pytest.fixture
def job(standin_cluster: Cluster, root: str, tmp_path: Path) -> tuple[str, str, str]:
    """2 partitions of 40 rows, trimmed to 5 and 8, a checkpoint whose committed batch ends at row 20 of each, the
    consumer at 30 on both."""
    q, c, location = job_with_checkpoint(standin_cluster, root, tmp_path / "cp", {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}},
                                         committed=1, rows=80, consumer_at=30)
    standin_cluster.trim_rows(q, 0, 5)
    standin_cluster.trim_rows(q, 1, 8)
    return q, c, location


def test_every_form_of_consumer_seek_works_ten_times_in_a_row_through_the_balancer(
        standin: StandinProxy, standin_cluster: Cluster, job, capsys, tmp_path: Path) -> None:
    q, c, location = job
    config = write_config(tmp_path / "opsd.yaml", standin.uri, q, c, location)
    forms = [
        (["--offset", "35"], {0: 35, 1: 35}),
        (["--to", "end", "--partition", "1"], {0: 35, 1: 40}),
        (["--to", "end", "--dry-run"], {0: 35, 1: 40}),
        (["--offset", "20", "--checkpoint", location], {0: 20, 1: 20}),
        (["--to", "end"], {0: 40, 1: 40}),
        (["--offset", "25", "--query", "run", "--config", str(config)], {0: 25, 1: 25}),
        (["--to", "trim", "--past-checkpoint"], {0: 5, 1: 8}),
        (["--offset", "30"], {0: 30, 1: 30}),
    ]

    for attempt in range(TIMES):
        for args, offsets in forms:
            code, out, err = follow(capsys, ["consumer", "seek", q, c, *args], standin.uri)
            assert (attempt, args, code, err) == (attempt, args, 0, "")
            assert standin_cluster.get_consumer_offsets(c, q) == offsets, (attempt, args, out)


def test_desync_heal_works_ten_times_in_a_row_through_the_balancer(
        standin: StandinProxy, standin_cluster: Cluster, root: str, capsys, tmp_path: Path) -> None:
    q, c, location = job_with_checkpoint(standin_cluster, root, tmp_path / "cp", {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}},
                                         committed=1, consumer_at=10)
    path = tmp_path / "watch.yaml"
    path.write_text(json.dumps({"cluster": standin.uri, "pipelines": [RATE_TO_CONSOLE],
                                "watch": [{"name": "spyt-job", "checkpoint_location": location, "queue": q,
                                           "consumer": c}]}))

    for attempt in range(TIMES):
        back = follow(capsys, ["consumer", "seek", q, c, "--offset", "10", "--past-checkpoint"], standin.uri)
        assert back[0] == 0, (attempt, back)
        assert main(["desync", "heal", "spyt-job", "--config", str(path)]) == 0, attempt
        assert "moved partition 0 10 -> 20, partition 1 10 -> 20" in capsys.readouterr().out
        assert standin_cluster.get_consumer_offsets(c, q) == {0: 20, 1: 20}
