"""`opsd status` for people: one block per query below 120 columns, a table where it fits; names, values and
headers whole, unknowns in words, a failure's error and whether it is final; the daemon found from its config."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from opsd.cli import main
from opsd.cli.blocks import WIDE
from opsd.cli.status import PIPELINE_FAILED, status_view
from opsd.observe.status import QueryStatus
from tests.support.cli import assert_fails
from tests.support.ports import free_port

NOW = 10_000.0
DOCUMENT = {"queries": {
    "clickstream_sessions_v2": {"active": True, "last_batch_id": 123456, "backlog_rows": 1234567, "restarts": 3,
                                "last_progress_at": NOW - 4.2},
    "orders_enrichment": {"active": False, "started_at": 1.0, "restarts": 12, "last_progress_at": NOW - 3 * 3600,
                          "exception_class": "org.apache.spark.sql.streaming.StreamingQueryException",
                          "error": "TrimmedRowsError: //home/q partition 0: rows [0, 10) were trimmed",
                          "permanent_failure": "TrimmedRowsError: the rows to read are gone"},
    "billing": {"active": True, "backlog_rows": None, "restarts": 0, "stalled": True},
    "late": {"active": False, "restarts": 0},
}}


def rendered(document: dict, width: int = 80) -> list[str]:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(status_view(document, width, now=lambda: NOW))
    return [line.rstrip() for line in console.export_text().splitlines()]


def block(lines: list[str], name: str) -> dict[str, str]:
    """The facts of one query's block: label -> value (a line without a label continues the error: `error+`)."""
    start = lines.index(name)
    value_at = len(re.match(r" +state +", lines[start + 1]).group(0))  # the column where the values start
    facts = {}
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        facts[line[:value_at].strip() or "error+"] = line[value_at:].strip()
    return facts


def status(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["status", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_below_120_columns_each_query_is_a_block_with_its_state_first_and_nothing_cut() -> None:
    lines = rendered(DOCUMENT)

    assert max(len(line) for line in lines) <= 80
    assert block(lines, "clickstream_sessions_v2") == {"state": "running", "batch": "123,456",
                                                       "last batch": "4 s ago", "backlog": "1,234,567",
                                                       "restarts": "3"}
    assert lines[lines.index("billing") + 1].split() == ["state", "stalled"]
    assert block(lines, "billing")["backlog"] == "unknown" and block(lines, "billing")["last batch"] == "-"


def test_a_failed_query_shows_its_error_and_whether_it_is_final() -> None:
    orders = block(rendered(DOCUMENT), "orders_enrichment")

    assert orders["state"] == "failed" and orders["last batch"] == "3 h ago"
    assert orders["error"] == "TrimmedRowsError: //home/q partition 0: rows [0, 10) were trimmed"
    assert orders["error+"] == "stopped for good: TrimmedRowsError: the rows to read are gone"
    restarted = {"queries": {"q": {"active": False, "started_at": 1.0, "exception_class": "X"}}}
    assert block(rendered(restarted), "q")["error+"] == "opsd restarts it"
    said_once = {"queries": {"q": {"active": False, "exception_class": "X", "error": "E: no such column",
                                   "permanent_failure": "E: no such column"}}}
    assert block(rendered(said_once), "q")["error+"] == "stopped for good", "the same message is not said twice"


def test_a_wide_terminal_gets_a_table_with_whole_names_and_the_failures_below() -> None:
    lines = rendered(DOCUMENT, WIDE)

    assert max(len(line) for line in lines) <= WIDE
    assert lines[1].split() == ["query", "state", "batch", "last", "batch", "backlog", "restarts"]
    assert [line.split() for line in lines if line.startswith(" billing")] == [
        ["billing", "stalled", "-", "-", "unknown", "0"]]
    assert [line.split()[:3] for line in lines if line.startswith(" orders")] == [["orders_enrichment", "failed", "-"]]
    failure = next(i for i, line in enumerate(lines) if line.startswith("orders_enrichment: "))
    assert " ".join(lines[failure:]) == ("orders_enrichment: TrimmedRowsError: //home/q partition 0: rows [0, 10) were "
                                         "trimmed; stopped for good: TrimmedRowsError: the rows to read are gone")


def test_unknown_values_are_words_not_none() -> None:
    for width in (80, WIDE):
        assert "None" not in "\n".join(rendered(DOCUMENT, width))


def test_names_too_long_for_the_width_fold_instead_of_being_cut() -> None:
    name = "a_pipeline_name_that_is_far_too_long_for_eighty_columns_" + "x" * 80

    assert name in "".join(rendered({"queries": {name: {"active": True}}}))
    wide = rendered({"queries": {name: {"active": True}}}, WIDE)
    assert name in "".join(wide)
    assert next(line for line in wide if line.startswith("  ")).split() == ["state", "running"], (
        "a name no table column can hold whole makes blocks, even on a wide terminal")


def test_no_queries_says_so() -> None:
    assert rendered({"queries": {}}) == ["no pipelines yet"]


@pytest.mark.parametrize(("query", "word"), [
    ({"active": True}, "running"),
    ({"active": True, "stalled": True}, "stalled"),
    ({"active": True, "stalled": True, "crash_loop": True}, "crash loop"),
    ({"active": False, "exception_class": "X", "started_at": 1.0}, "failed"),
    ({"active": False, "started_at": 1.0}, "stopped"),
    ({"active": False}, "not started"),
])
def test_state_word_names_the_most_urgent_state(query: dict, word: str) -> None:
    assert QueryStatus("q", **query).state == word
    assert block(rendered({"queries": {"q": query}}), "q")["state"] == word


def test_the_spark_ui_address_is_printed_when_the_daemon_serves_one() -> None:
    assert rendered({**DOCUMENT, "spark_ui": "http://10.0.0.7:4040"})[-1] == "Spark UI: http://10.0.0.7:4040"
    assert not [line for line in rendered(DOCUMENT) if "Spark UI" in line]


@pytest.fixture
def daemon() -> Iterator[tuple[int, dict]]:
    """A stand-in daemon on a free port serving `document["body"]` as `/status`."""
    document: dict = {"body": {"queries": {}}}

    class Status(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(document["body"]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Status)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], document
    finally:
        server.shutdown()


def config_file(tmp_path: Path, port: int, host: str = "0.0.0.0") -> str:
    path = tmp_path / "opsd.yaml"
    path.write_text(f"http: {{host: '{host}', port: {port}}}\npipelines:\n  - name: p\n    source: {{path: //q, "
                    "options: {consumer_path: //c}}\n    sink: {format: console}\n")
    return str(path)


def test_the_daemon_is_found_from_its_config_and_a_failed_pipeline_exits_non_zero(
        capsys: pytest.CaptureFixture[str], daemon: tuple[int, dict], tmp_path: Path) -> None:
    port, document = daemon
    document["body"] = {"queries": {"p": {"active": True, "last_batch_id": 7}}}
    code, out, _ = status(capsys, "--config", config_file(tmp_path, port))
    assert code == 0 and "running" in out

    document["body"] = DOCUMENT
    assert status(capsys, "--config", config_file(tmp_path, port, "127.0.0.1"))[0] == PIPELINE_FAILED
    assert status(capsys, "--url", f"http://127.0.0.1:{port}", "--json")[0] == PIPELINE_FAILED


def test_no_daemon_at_the_address_says_how_to_name_another(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    port = free_port()  # nobody listens there
    assert_fails(status(capsys, "--config", config_file(tmp_path, port)),
                 f"no opsd daemon answers at http://127.0.0.1:{port}", "is `opsd run` running?")
    assert_fails(status(capsys, "--url", f"http://127.0.0.1:{port}"), "--config ITS_CONFIG.yaml, or --url")
