"""`opsd status` for people: a table that fits 80 columns, names and headers whole, unknowns in words, errors below."""

from __future__ import annotations

import pytest
from rich.console import Console

from opsd.cli.status import status_view
from opsd.observe.status import QueryStatus

DOCUMENT = {"queries": {
    "clickstream_sessions_v2": {"active": True, "last_batch_id": 123456, "backlog_rows": 1234567, "restarts": 3},
    "orders_enrichment": {"active": False, "started_at": 1.0, "restarts": 12,
                          "exception_class": "org.apache.spark.sql.streaming.StreamingQueryException"},
    "billing": {"active": True, "backlog_rows": None, "restarts": 0, "stalled": True},
    "late": {"active": False, "restarts": 0},
}}


def rendered(document: dict, width: int = 80) -> list[str]:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(status_view(document, width))
    return [line.rstrip() for line in console.export_text().splitlines()]


def test_the_table_fits_80_columns_with_whole_names_and_headers_on_one_line() -> None:
    lines = rendered(DOCUMENT)

    assert max(len(line) for line in lines) <= 80
    assert lines[1].split() == ["query", "state", "batch", "backlog", "restarts"]
    for name in DOCUMENT["queries"]:
        assert any(line.split()[:1] == [name] for line in lines), name


def test_unknown_values_are_words_not_none() -> None:
    text = "\n".join(rendered(DOCUMENT))

    assert "None" not in text
    [billing] = [line.split() for line in text.splitlines() if line.startswith(" billing")]
    assert billing == ["billing", "stalled", "-", "unknown", "0"]


def test_a_failed_query_is_followed_by_its_exception_class_in_full() -> None:
    lines = rendered(DOCUMENT)

    assert [line.split() for line in lines if line.startswith(" orders")] == [
        ["orders_enrichment", "failed", "-", "unknown", "12"]]
    assert lines[-1] == "orders_enrichment: org.apache.spark.sql.streaming.StreamingQueryException"


def test_names_too_long_for_the_width_fold_instead_of_being_cut() -> None:
    name = "a_pipeline_name_that_is_far_too_long_for_eighty_columns_" + "x" * 30

    text = "".join(line.split()[0] for line in rendered({"queries": {name: {"active": True}}})[3:])

    assert name in text


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
    assert word in rendered({"queries": {"q": query}})[3]


def test_the_spark_ui_address_is_printed_when_the_daemon_serves_one() -> None:
    assert rendered({**DOCUMENT, "spark_ui": "http://10.0.0.7:4040"})[-1] == "Spark UI: http://10.0.0.7:4040"
    assert not [line for line in rendered(DOCUMENT) if "Spark UI" in line]
