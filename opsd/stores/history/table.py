"""The history table, defined once: a sorted dynamic table keyed by (query, id), `id` the decision's time in
microseconds made unique per query, so one table may hold several queries' decisions (`checks.history_path`) or
one (the default: next to the query's tuning document). `before`, `after` and `inputs` are JSON text.

Where a query's table is (`history_path`), the row of an entry (`to_row`) and the entry of a row (`from_row`, whose
errors name the table, the row and the field).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from opsd.config.models import OpsdConfig
from opsd.observe.status import jsonable
from opsd.results.history import HistoryEntry, HistoryKind
from streaming_core.tuning import default_tuning_path

#: The table's schema (YTsaurus' column specs).
HISTORY_SCHEMA: list[dict[str, Any]] = [
    {"name": "query", "type": "string", "sort_order": "ascending", "required": True},
    {"name": "id", "type": "int64", "sort_order": "ascending", "required": True},
    {"name": "at", "type": "double", "required": True},
    {"name": "kind", "type": "string", "required": True},
    {"name": "subject", "type": "string", "required": True},
    {"name": "outcome", "type": "string", "required": True},
    {"name": "reason", "type": "string", "required": True},
    {"name": "before", "type": "string"},
    {"name": "after", "type": "string"},
    {"name": "inputs", "type": "string"},
]
#: The suffix of a query's history table next to its tuning document.
SUFFIX = "_history"


def history_path(configured: str | None, tuning_document: str | None) -> str | None:
    """A query's history table: the configured one (shared by every query), else next to its tuning document (None:
    the query has neither, and no history)."""
    return configured or (f"{tuning_document}{SUFFIX}" if tuning_document else None)


def history_paths(config: OpsdConfig) -> dict[str, str]:
    """Each query's history table: pipelines by their source's (else sink's) tuning document, watched queries by
    their consumer's; a query with neither (and no `checks.history_path`) keeps none."""
    configured = config.checks.history_path
    found = {p.name: history_path(configured, p.source_tuning_path() or p.sink_tuning_path())
             for p in config.pipelines}
    found.update({w.name: history_path(configured, default_tuning_path(w.consumer)) for w in config.watch})
    return {query: path for query, path in found.items() if path}


def key(query: str, entry_id: int) -> dict[str, Any]:
    return {"query": query, "id": entry_id}


def to_row(entry: HistoryEntry, entry_id: int) -> dict[str, Any]:
    def text(value: Any) -> str:
        return json.dumps(value, sort_keys=True, default=str)

    return {**key(entry.query, entry_id), "at": entry.at, "kind": entry.kind.value, "subject": entry.subject,
            "outcome": entry.outcome.value, "reason": entry.reason.value, "before": text(jsonable(entry.before)),
            "after": text(jsonable(entry.after)), "inputs": text(jsonable(entry.inputs))}


def from_row(row: Mapping[str, Any], path: str) -> HistoryEntry:
    """The entry of a row; `ValueError` naming the table, the row's key and the field when a field is unreadable."""
    where = f"{path}: row (query={row.get('query')!r}, id={row.get('id')!r})"

    def value(name: str) -> Any:
        text = row.get(name)
        try:
            return None if text is None else json.loads(text)
        except (TypeError, json.JSONDecodeError) as e:
            raise ValueError(f"{where}: field {name!r} is not JSON text: {e}") from None

    try:
        kind = HistoryKind(row.get("kind"))
    except ValueError:
        raise ValueError(f"{where}: field 'kind' is {row.get('kind')!r}, expected one of "
                         f"{', '.join(k.value for k in HistoryKind)}") from None
    before, after, inputs = value("before"), value("after"), value("inputs")
    if inputs is not None and not isinstance(inputs, dict):
        raise ValueError(f"{where}: field 'inputs' must be a JSON object")
    try:
        outcome = HistoryEntry.outcome_of(str(row.get("outcome")))
    except ValueError:
        raise ValueError(f"{where}: field 'outcome' is {row.get('outcome')!r}, not an outcome this version knows") \
            from None
    try:
        reason = HistoryEntry.reason_of(str(row.get("reason")))
    except ValueError:
        raise ValueError(f"{where}: field 'reason' is {row.get('reason')!r}, not a reason this version knows") \
            from None
    return HistoryEntry(str(row["query"]), float(row["at"]), kind, str(row["subject"]), outcome,
                        reason, before, after, inputs or {})
