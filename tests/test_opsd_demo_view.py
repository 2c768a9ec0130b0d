"""The demo's view without Spark: its facts, the backlog bar, and plain periodic lines when output is piped."""

from __future__ import annotations

import io
import shlex

import pytest
from rich.console import Console

from opsd.cli.main import build_parser
from opsd.demo.view import (
    BAR_WIDTH,
    ROWS,
    Display,
    Snapshot,
    backlog_bar,
    batches_done,
    facts,
    next_steps,
    summary,
)
from opsd.observe.progress import BatchSummary
from opsd.observe.status import QueryStatus

QUERY = {"active": True, "last_batch_id": 4, "backlog_rows": 1200, "max_rows_per_partition": 20000,
         "dyn_batch_size": 50000, "last_progress": BatchSummary(4, 3000, duration_seconds=1.25)}


def snapshot(elapsed: float = 3.0, **query: object) -> Snapshot:
    return Snapshot(elapsed, produced=6000, written=4800, query=QueryStatus("demo", **{**QUERY, **query}),
                    url="http://h:1",
                    log_file="/x/demo.log", activity="Processing new data")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_batch_zero_counts_as_one_batch() -> None:
    assert [batches_done(None), batches_done(0), batches_done(4)] == [0, 1, 5]


def test_the_facts_are_what_opsd_knows_of_the_query() -> None:
    assert dict(facts(snapshot())) == {
        "rows produced": "6,000", "rows written": "4,800", "batches done": "5",
        "last batch": "#4: 3,000 rows in 1.25 s", "backlog rows": "1,200", "query": "running",
        "activity": "Processing new data", "max rows/partition": "20,000", "dyn batch size": "50,000",
        "metrics": "http://h:1/metrics", "logs": "/x/demo.log"}
    assert len(ROWS) == len(facts(snapshot()))


def test_facts_opsd_does_not_know_yet_say_so() -> None:
    empty = Snapshot(0.5, 0, 0, None, None, "/x/demo.log")

    assert dict(facts(empty))["backlog rows"] == "unknown"
    assert dict(facts(empty))["last batch"] == "none yet"
    assert dict(facts(empty))["query"] == "starting"


def test_the_backlog_bar_is_empty_at_zero_rows_and_full_at_the_peak() -> None:
    assert backlog_bar(0, 5000) == "░" * BAR_WIDTH
    assert backlog_bar(None, 5000) == "░" * BAR_WIDTH
    assert backlog_bar(5000, 5000) == "█" * BAR_WIDTH
    assert backlog_bar(2500, 5000).count("█") == BAR_WIDTH // 2
    assert backlog_bar(1, 5000).count("█") == 1, "a backlog is never drawn as none"


def test_piped_output_is_one_plain_line_every_interval_and_the_last_one() -> None:
    out = io.StringIO()
    clock = Clock()
    with Display(Console(file=out), every_seconds=2.0, clock=clock) as display:
        for tick in range(10):  # 0.0 .. 4.5 s
            clock.now = tick * 0.5
            display.show(snapshot(elapsed=clock.now, backlog_rows=tick))

    lines = out.getvalue().splitlines()
    assert [line[:9] for line in lines] == ["[   0.0 s", "[   2.0 s", "[   4.0 s", "[   4.5 s"]
    assert "backlog rows 9 |" in lines[-1] and "rows written 4,800" in lines[-1]
    assert "\x1b" not in out.getvalue(), "no terminal control codes in piped output"


def test_the_summary_counts_are_the_last_snapshots() -> None:
    console = Console(file=io.StringIO(), width=100, record=True)
    console.print(summary(snapshot(), [1.0, 3.0]))
    text = console.export_text()

    assert "6,000" in text and "4,800" in text and "MISSING ROWS" in text
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in text.splitlines() if "│" in line}
    assert (rows["batches"], rows["batches that read rows"]) == ("5", "2")


@pytest.mark.hostile
def test_hostile_text_in_the_view_is_shown_as_text_on_a_terminal_and_piped() -> None:
    hostile = "[/oops] [link=https://evil.example]x[/link] \x1b]0;pwned\x07\r"
    shot = Snapshot(3.0, produced=1, written=1, query=QueryStatus("demo", **QUERY), url=None,
                    log_file=f"/x/{hostile}.log", activity=hostile)
    for terminal in (True, False):
        out = io.StringIO()
        with Display(Console(file=out, force_terminal=terminal, width=300)) as display:
            display.show(shot)
        text = out.getvalue()
        assert "[/oops]" in text and "[link=https://evil.example]" in text and "\\x1b]0;pwned\\x07\\r" in text
        assert "\x1b]" not in text and "\x07" not in text


def test_the_next_steps_name_the_demos_cluster_as_text() -> None:
    out = io.StringIO()
    Console(file=out, width=200).print(next_steps("local:///tmp/[bold]x\x1b[2J"))
    lines = out.getvalue().splitlines()

    assert lines[0] == "next:" and len(lines) == 4
    assert lines[1].split()[:4] == ["opsd", "table", "read", "//home/demo/result"]
    assert lines[2].split()[:4] == ["opsd", "queue", "inspect", "//home/demo/queue"]
    assert "--cluster local:///tmp/[bold]x" in lines[1] and "\x1b" not in out.getvalue()


def test_every_next_step_is_a_command_line_opsd_parses() -> None:
    commands = [line.split("#")[0] for line in str(next_steps("local:///tmp/demo")).splitlines()[1:]]

    parsed = [build_parser().parse_args(shlex.split(command)[1:]) for command in commands]
    assert [args.command for args in parsed] == ["table", "queue", "run"]
    assert parsed[2].config == "examples/configs/queue_to_table.yaml"
