"""Errors as the YTsaurus HTTP proxy sends them: error objects with a code, a message, attributes, inner errors.

Codes are YTsaurus' own (`yt/yt/core/misc/error_code.h`, `ytree`, `security_client`, `queue_client`): what the
real client branches on (`is_resolve_error`, `is_already_exists`, `contains_code`) sees the code the cluster
would send.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
from typing import Any

from streaming_core.cluster.errors import (
    AlreadyExistsError,
    ClusterError,
    ConflictError,
    InvalidEpochError,
    NoSuchPathError,
    NotRegisteredError,
    SchemaError,
    SequenceNumberError,
    TrimmedRowsError,
    ZombieEpochError,
)
from streaming_core.cluster.ytsaurus.errors import (
    AUTHORIZATION_ERROR,
    CONSUMER_OFFSET_CONFLICT,
    INVALID_EPOCH,
    INVALID_ROW_SEQUENCE_NUMBERS,
    ZOMBIE_EPOCH,
)

GENERIC = 1
RESOLVE_ERROR = 500
ALREADY_EXISTS = 501
AUTHENTICATION_ERROR = 900
SCHEMA_VIOLATION = 307
NO_SUCH_TRANSACTION = 11000
NO_SUCH_TABLET = 1701
TABLET_NOT_MOUNTED = 1702
#: The native client's `TooManyRowsInTransaction` (a tablet's rows in one transaction past the limit).
TOO_MANY_ROWS_IN_TRANSACTION = 1717
UNAVAILABLE = 105


class YtCodedError(ClusterError):
    """An error with a YTsaurus code of its own (no such transaction, an injected fault), and the attributes YTsaurus
    puts into it (a lock conflict's `winner_transaction`)."""

    def __init__(self, code: int, message: str, **attributes: Any) -> None:
        super().__init__(message)
        self.code = code
        self.attributes = attributes


class BadRequest(ClusterError):
    """A request the stand-in cannot answer (missing parameter, unsupported format or query)."""


_CODES: tuple[tuple[type[Exception], int], ...] = (
    (NoSuchPathError, RESOLVE_ERROR), (AlreadyExistsError, ALREADY_EXISTS),
    (ConflictError, CONSUMER_OFFSET_CONFLICT), (NotRegisteredError, AUTHORIZATION_ERROR),
    (SchemaError, SCHEMA_VIOLATION), (TrimmedRowsError, GENERIC), (ZombieEpochError, ZOMBIE_EPOCH),
    (InvalidEpochError, INVALID_EPOCH), (SequenceNumberError, INVALID_ROW_SEQUENCE_NUMBERS),
)


def error_object(code: int, message: str, inner: list[dict[str, Any]] | None = None,
                 **attributes: Any) -> dict[str, Any]:
    """A YTsaurus error object, with the attributes the proxy adds (host, pid, datetime)."""
    attrs = {"host": socket.gethostname(), "pid": os.getpid(),
             "datetime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), **attributes}
    return {"code": code, "message": message, "attributes": attrs, "inner_errors": inner or []}


def from_exception(err: Exception, command: str) -> dict[str, Any]:
    """The error object for an exception of a command: the YTsaurus code its class stands for, the cause inside."""
    code = getattr(err, "code", None) or next((c for cls, c in _CODES if isinstance(err, cls)), GENERIC)
    if isinstance(err, NotRegisteredError) and "not registered" not in str(err):
        message = f"{err}: consumer is not registered"
    else:
        message = str(err)
    return error_object(GENERIC, f"Error executing command {command}",
                        inner=[error_object(code, message, **getattr(err, "attributes", {}))])
