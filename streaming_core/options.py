"""Every option and Spark conf key of the `yt` data source, parsed once into typed objects.

Options arrive as strings (keys lower-cased by Spark). Each parse error names the option at fault, and
an unknown option is an error too: a typo such as `max_row_per_partition` must not silently read a
whole queue into one batch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .cluster import resolve_uri, yt_uri
from .cluster.errors import InvalidUriError
from .tuning import default_tuning_path

#: The data source's format name: `spark.read.format("yt")`.
FORMAT = "yt"

# Source options (SPYT names).
PATH = "path"
CONSUMER_PATH = "consumer_path"
MAX_ROWS_PER_PARTITION = "max_rows_per_partition"
MAX_BYTES_PER_PARTITION = "max_bytes_per_partition"
INCLUDE_SERVICE_COLUMNS = "include_service_columns"
PARSING_TYPE_V3 = "parsing_type_v3"
# Sink options.
WRITE_TYPE_V3 = "write_type_v3"
DYN_BATCH_SIZE = "dyn_batch_size"
TRANSACTIONAL = "transactional"
# Producer mode (exactly-once into a queue through a YTsaurus queue producer; `streaming_core.sink_producer`).
PRODUCER_PATH = "producer_path"
CREATE_PRODUCER = "create_producer"
PRODUCER_SEQUENCE = "producer_sequence"
PRODUCER_SESSION = "producer_session"
#: `producer_sequence` values: numbers from the micro-batch id and the row's place in its task (any deterministic
#: transformation), or from the source's row index (queue to queue, with `include_service_columns`).
SEQUENCE_BY_BATCH, SEQUENCE_BY_SOURCE = "batch", "source"
# Batch writes of new static tables (SPYT names: `sorted_by(...)`, `optimize_for(...)`), and the save mode.
SORT_COLUMNS = "sort_columns"
UNIQUE_KEYS = "unique_keys"
OPTIMIZE_FOR = "optimize_for"
SAVE_MODE = "save_mode"
# Both.
CLUSTER = "cluster"
TUNING_PATH = "tuning_path"
# Added by Spark to stream writer options.
CHECKPOINT_LOCATION = "checkpointlocation"
QUERY_NAME = "queryname"

# Spark session conf keys (snapshotted by `streaming_core.register`).
CONF_READ_TYPE_V3 = "spark.yt.read.typeV3.enabled"
CONF_WRITE_TYPE_V3 = "spark.yt.write.typeV3.enabled"
CONF_DYN_BATCH_SIZE = "spark.yt.write.dynBatchSize"
CONF_TRANSACTIONAL = "spark.yt.streaming.transactional"
CONF_CLUSTER = "spark.yt.cluster"
CONF_PROXY = "spark.hadoop.yt.proxy"
SESSION_CONF_KEYS = (CONF_READ_TYPE_V3, CONF_WRITE_TYPE_V3, CONF_DYN_BATCH_SIZE, CONF_TRANSACTIONAL,
                     CONF_CLUSTER, CONF_PROXY)

DEFAULT_DYN_BATCH_SIZE = 50_000
#: Service columns prepended with `include_service_columns` (SPYT names).
SRC_TABLET_INDEX = "__spyt_streaming_src_tablet_index"
SRC_ROW_INDEX = "__spyt_streaming_src_row_index"

_SOURCE_KEYS = {PATH, CONSUMER_PATH, MAX_ROWS_PER_PARTITION, MAX_BYTES_PER_PARTITION, INCLUDE_SERVICE_COLUMNS,
                PARSING_TYPE_V3, CLUSTER, TUNING_PATH}
_SINK_KEYS = {PATH, WRITE_TYPE_V3, DYN_BATCH_SIZE, TRANSACTIONAL, CLUSTER, TUNING_PATH, CHECKPOINT_LOCATION,
              QUERY_NAME, SORT_COLUMNS, UNIQUE_KEYS, OPTIMIZE_FOR, SAVE_MODE, PRODUCER_PATH, CREATE_PRODUCER,
              PRODUCER_SEQUENCE, PRODUCER_SESSION}
#: Spark's save modes (`df.write.mode(...)`), lower-cased, with their aliases.
SAVE_MODES = {"append": "append", "overwrite": "overwrite", "errorifexists": "errorifexists",
              "error": "errorifexists", "default": "errorifexists", "ignore": "ignore"}
OPTIMIZE_FOR_VALUES = ("scan", "lookup")
#: Units a byte size may carry (`16m`, `64MiB`, `1g`): binary multiples, as Spark's byte-size confs read them.
_BYTE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_BYTE_SIZE = re.compile(r"(\d+)\s*(?:([kmgt])i?b?|b)?", re.IGNORECASE)


def parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"option {name!r} must be true or false, got {value!r}")


def parse_positive_int(name: str, value: Any) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"option {name!r} must be a positive integer, got {value!r}") from None
    if number < 1:
        raise ValueError(f"option {name!r} must be a positive integer, got {value!r}")
    return number


def parse_byte_size(name: str, value: Any) -> int:
    """A positive number of bytes: an integer, or one with a binary unit (`16m`, `64MiB`, `1g`: Spark's spelling)."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        match = _BYTE_SIZE.fullmatch(str(value).strip())
        number = int(match.group(1)) * _BYTE_UNITS[(match.group(2) or "").lower()] if match else 0
    if number < 1:
        raise ValueError(f"option {name!r} must be a positive number of bytes (e.g. 16777216, 16m or 64MiB), "
                         f"got {value!r}")
    return number


def _yt_path(name: str, value: Any) -> str:
    text = str(value or "").strip()
    if not text.startswith("//"):
        raise ValueError(f"option {name!r} must be a YT path starting with '//', got {value!r}")
    return text.rstrip("/")


def parse_column_list(name: str, value: Any) -> tuple[str, ...]:
    """Column names from a JSON list (`'["a", "b"]'`, as SPYT's `sorted_by` sends them) or `a,b`."""
    text = str(value).strip()
    if text.startswith("["):
        try:
            names = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"option {name!r}: invalid JSON list {value!r}: {e.msg}") from None
    else:
        names = [n.strip() for n in text.split(",") if n.strip()]
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"option {name!r} must list column names, got {value!r}")
    return tuple(names)


def _choice(name: str, value: Any, choices: Mapping[str, str] | tuple[str, ...]) -> str:
    text = str(value).strip().lower()
    allowed = choices if isinstance(choices, Mapping) else {c: c for c in choices}
    if text not in allowed:
        raise ValueError(f"option {name!r} must be one of {sorted(allowed)}, got {value!r}")
    return allowed[text]


def _cluster(options: Mapping[str, str], session: Mapping[str, str]) -> str:
    uri = options.get(CLUSTER) or session.get(CONF_CLUSTER)
    if not uri and session.get(CONF_PROXY):
        uri = yt_uri(session[CONF_PROXY])
    try:
        return resolve_uri(uri)
    except InvalidUriError as e:
        raise ValueError(f"option {CLUSTER!r}: {e}") from None


def _check_unknown(options: Mapping[str, str], known: set[str], what: str) -> None:
    unknown = sorted(k for k in options if k.lower() not in known)
    if unknown:
        raise ValueError(f"unknown {what} option(s) {unknown}; known options: {sorted(known)}")


def configured_dyn_batch_size(options: Mapping[str, Any], session: Mapping[str, Any]) -> int:
    """The sink's rows per insert as configured: option `dyn_batch_size`, else the session conf, else 50000."""
    for name, given in ((DYN_BATCH_SIZE, options), (CONF_DYN_BATCH_SIZE, session)):
        if given.get(name) is not None:
            return parse_positive_int(name, given[name])
    return DEFAULT_DYN_BATCH_SIZE


def configured_max_rows_per_partition(options: Mapping[str, Any]) -> int | None:
    """The source's configured per-partition cap (option `max_rows_per_partition`); None = no cap."""
    value = options.get(MAX_ROWS_PER_PARTITION)
    return None if value is None else parse_positive_int(MAX_ROWS_PER_PARTITION, value)


def configured_max_bytes_per_partition(options: Mapping[str, Any]) -> int | None:
    """The source's configured per-partition byte cap (option `max_bytes_per_partition`); None = no cap."""
    value = options.get(MAX_BYTES_PER_PARTITION)
    return None if value is None else parse_byte_size(MAX_BYTES_PER_PARTITION, value)


@dataclass(frozen=True)
class SourceOptions:
    """Options of `spark.read[Stream].format("yt")`."""

    path: str
    cluster: str
    consumer_path: str | None = None
    max_rows_per_partition: int | None = None
    max_bytes_per_partition: int | None = None
    include_service_columns: bool = False
    parsing_type_v3: bool = False
    tuning_path: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], session: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        options = {k.lower(): v for k, v in options.items()}
        _check_unknown(options, _SOURCE_KEYS, "source")
        if not options.get(PATH):
            raise ValueError("option 'path' is required: .load('//path/to/queue')")
        if streaming and not options.get(CONSUMER_PATH):
            raise ValueError(f"option {CONSUMER_PATH!r} is required for streaming reads")
        consumer = _yt_path(CONSUMER_PATH, options[CONSUMER_PATH]) if options.get(CONSUMER_PATH) else None
        return cls(
            path=_yt_path(PATH, options[PATH]),
            cluster=_cluster(options, session),
            consumer_path=consumer,
            max_rows_per_partition=configured_max_rows_per_partition(options),
            max_bytes_per_partition=configured_max_bytes_per_partition(options),
            include_service_columns=parse_bool(INCLUDE_SERVICE_COLUMNS, options.get(INCLUDE_SERVICE_COLUMNS, False)),
            parsing_type_v3=parse_bool(PARSING_TYPE_V3, options.get(PARSING_TYPE_V3,
                                                                     session.get(CONF_READ_TYPE_V3, False))),
            tuning_path=_yt_path(TUNING_PATH, options[TUNING_PATH]) if options.get(TUNING_PATH)
            else default_tuning_path(consumer),
        )


@dataclass(frozen=True)
class SinkOptions:
    """Options of `writeStream.format("yt")` / `df.write.format("yt")`."""

    path: str
    cluster: str
    dyn_batch_size: int = DEFAULT_DYN_BATCH_SIZE
    write_type_v3: bool = False
    transactional: bool = False
    tuning_path: str | None = None
    checkpoint_location: str | None = None
    query_name: str | None = None
    #: Batch writes only: the save mode when given as an option (`df.write.yt` passes Spark's), and how a
    #: new static table is made: key columns (ascending), `unique_keys`, `optimize_for`.
    save_mode: str | None = None
    sort_columns: tuple[str, ...] = ()
    unique_keys: bool = False
    optimize_for: str | None = None
    #: Producer mode: the producer table (None: not in producer mode), whether to create it when missing, how rows
    #: are numbered (`SEQUENCE_BY_BATCH` / `SEQUENCE_BY_SOURCE`) and the sessions' name (default: from the query).
    producer_path: str | None = None
    create_producer: bool = False
    producer_sequence: str = SEQUENCE_BY_BATCH
    producer_session: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], session: Mapping[str, str]) -> SinkOptions:
        options = {k.lower(): v for k, v in options.items()}
        _check_unknown(options, _SINK_KEYS, "sink")
        if not options.get(PATH):
            raise ValueError("option 'path' is required: .option('path', '//path/to/table')")
        return cls(
            path=_yt_path(PATH, options[PATH]),
            cluster=_cluster(options, session),
            dyn_batch_size=configured_dyn_batch_size(options, session),
            write_type_v3=parse_bool(WRITE_TYPE_V3, options.get(WRITE_TYPE_V3, session.get(CONF_WRITE_TYPE_V3, False))),
            transactional=parse_bool(TRANSACTIONAL, options.get(TRANSACTIONAL,
                                                                 session.get(CONF_TRANSACTIONAL, False))),
            tuning_path=_yt_path(TUNING_PATH, options[TUNING_PATH]) if options.get(TUNING_PATH) else None,
            checkpoint_location=options.get(CHECKPOINT_LOCATION) or None,
            query_name=options.get(QUERY_NAME) or None,
            save_mode=_choice(SAVE_MODE, options[SAVE_MODE], SAVE_MODES) if options.get(SAVE_MODE) else None,
            sort_columns=parse_column_list(SORT_COLUMNS, options[SORT_COLUMNS]) if options.get(SORT_COLUMNS) else (),
            unique_keys=parse_bool(UNIQUE_KEYS, options.get(UNIQUE_KEYS, False)),
            optimize_for=_choice(OPTIMIZE_FOR, options[OPTIMIZE_FOR], OPTIMIZE_FOR_VALUES)
            if options.get(OPTIMIZE_FOR) else None,
            **_producer_options(options, session),
        )


def _producer_options(options: Mapping[str, Any], session: Mapping[str, Any]) -> dict[str, Any]:
    """The producer-mode fields of `SinkOptions`; the producer's own options without `producer_path` are errors, as
    is producer mode together with `transactional` (two ways to exactly-once: choose one)."""
    if not options.get(PRODUCER_PATH):
        given = sorted(k for k in (CREATE_PRODUCER, PRODUCER_SEQUENCE, PRODUCER_SESSION) if k in options)
        if given:
            raise ValueError(f"option(s) {given} need option {PRODUCER_PATH!r} (the queue producer to write through)")
        return {}
    if parse_bool(TRANSACTIONAL, options.get(TRANSACTIONAL, session.get(CONF_TRANSACTIONAL, False))):
        raise ValueError(f"options {PRODUCER_PATH!r} and {TRANSACTIONAL!r} are two ways to exactly-once: give one")
    session = str(options.get(PRODUCER_SESSION) or "").strip() or None
    if session is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", session):
        raise ValueError(f"option {PRODUCER_SESSION!r} must be 1 to 64 letters, digits, '_', '.' or '-', "
                         f"got {options[PRODUCER_SESSION]!r}")
    return {"producer_path": _yt_path(PRODUCER_PATH, options[PRODUCER_PATH]),
            "create_producer": parse_bool(CREATE_PRODUCER, options.get(CREATE_PRODUCER, False)),
            "producer_sequence": _choice(PRODUCER_SEQUENCE, options.get(PRODUCER_SEQUENCE, SEQUENCE_BY_BATCH),
                                         (SEQUENCE_BY_BATCH, SEQUENCE_BY_SOURCE)),
            "producer_session": session}
