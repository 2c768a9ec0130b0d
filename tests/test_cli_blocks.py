"""The one layout of `opsd status`, `opsd doctor` and `opsd desync show` (`opsd.cli.blocks`): blocks below 120
columns with values wrapping under their column, a table where it fits, whole lines when piped; never `…`; data as
text, never markup. And every state, reason and outcome people read has words."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from opsd.cli.blocks import WIDE, Column, Item, console, view, view_width
from opsd.results.autotune import TUNE_REASON_WORDS, TuneReason
from opsd.results.desync import DESYNC_WORDS, HEAL_WORDS, DesyncState, HealOutcome
from opsd.results.values import in_words

COLUMNS = (Column("query"), Column("state"), Column("rows", "right"), Column("advice"))
ADVICE = ("register the consumer as vital (opsd consumer register //home/analytics/clickstream/queue "
          "//home/analytics/clickstream/consumer --vital) so trimming waits for it, then restart the query")
ITEMS = [Item("clicks", ("checkpoint behind the trim: its rows are gone", "1,234", ADVICE)),
         Item("orders", ("in sync", "0", None))]


def printed(parts: list, console_: Console) -> list[str]:
    for part in parts:
        console_.print(part)
    return console_.file.getvalue().splitlines()


def at(width: int) -> Console:
    return Console(width=width, file=io.StringIO())


def test_below_120_columns_each_item_is_a_block_its_values_wrapping_under_their_column() -> None:
    lines = printed(view(COLUMNS, ITEMS, 80, title="pipelines"), at(80))

    assert lines[:4] == ["pipelines", "", "clicks", "  state   checkpoint behind the trim: its rows are gone"]
    advice = lines.index(next(line for line in lines if line.startswith("  advice")))
    continued = lines[advice + 1:lines.index("", advice)]
    assert continued and all(line.startswith(" " * 10) and line[10] != " " for line in continued)
    assert " ".join(line[10:] for line in lines[advice:advice + 1 + len(continued)]) == ADVICE
    assert max(len(line) for line in lines) <= 80 and "…" not in "".join(lines)
    assert lines[-2:] == ["  state   in sync", "  rows    0"], "a fact with no value is left out of its block"


def test_a_table_where_it_fits_blocks_where_a_word_would_be_split() -> None:
    lines = printed(view(COLUMNS, ITEMS, 200, title="pipelines"), at(200))

    assert lines[1].split() == ["query", "state", "rows", "advice"]
    assert [line.split()[:2] for line in lines if line.startswith(" orders")] == [["orders", "in"]]
    assert max(len(line.rstrip()) for line in lines) <= 200

    long_name = "q" * 130
    narrow = printed(view(COLUMNS, [Item(long_name, ("in sync", "0", None))], WIDE), at(WIDE))
    assert narrow[0] == "q" * WIDE and narrow[1] == "q" * 10 and narrow[2].split() == ["state", "in", "sync"]


def test_piped_output_is_blocks_whole_never_cut_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    piped = console(io.StringIO())

    assert view_width(piped) is None
    lines = printed(view(COLUMNS, ITEMS, view_width(piped)), piped)
    assert f"  advice  {ADVICE}" in lines and lines[0] == "clicks"
    monkeypatch.setenv("COLUMNS", "200")
    assert view_width(console(io.StringIO())) == 200, "COLUMNS sizes a pipe's output where it is set"


def test_data_is_shown_as_text_never_as_markup() -> None:
    items = [Item("[bold]q[/bold]", ("[link=http://x]in sync[/link]", "0", "[/oops]"))]

    for width in (80, 200):
        text = "\n".join(printed(view(COLUMNS, items, width, title="[/title]"), at(width)))
        assert "[bold]q[/bold]" in text and "[link=http://x]in sync[/link]" in text and "[/oops]" in text
        assert text.startswith("[/title]")


@pytest.mark.parametrize(("kind", "words"), [(DesyncState, DESYNC_WORDS), (TuneReason, TUNE_REASON_WORDS),
                                             (HealOutcome, HEAL_WORDS)])
def test_every_state_reason_and_outcome_has_words_of_its_own(kind: type, words: dict) -> None:
    assert set(words) == set(kind)
    for member in kind:
        assert member.words == words[member] and member.words != member.value and "_" not in member.words
    assert len(set(words.values())) == len(words), "two members in the same words"


def test_a_value_read_from_a_document_is_put_in_words_unless_this_version_does_not_know_it() -> None:
    assert in_words(TuneReason, "cap_not_binding") == "the cap is not what limits batches"
    assert in_words(DesyncState, "behind_trim") == DesyncState.BEHIND_TRIM.words
    assert in_words(DesyncState, "a_state_of_a_newer_daemon") == "a_state_of_a_newer_daemon"
