"""YTsaurus errors as the cluster interface's own: the class chosen by YT error code, the token scrubbed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yt.wrapper as yt
from yt.common import YtError

from ...redaction import without_secret
from ..errors import (
    AccessDeniedError,
    AlreadyExistsError,
    AuthenticationError,
    ClusterError,
    ConflictError,
    InvalidEpochError,
    MissingTokenError,
    NoSuchPathError,
    NotRegisteredError,
    SequenceNumberError,
    ZombieEpochError,
)

#: YTsaurus error codes the backend tells apart (the stand-in answers with the same).
CONSUMER_OFFSET_CONFLICT = 3100
#: Queue producers (`yt/yt/client/queue_client/public.h`): an epoch never given out, an older epoch (a zombie),
#: sequence numbers missing or not increasing.
INVALID_EPOCH, ZOMBIE_EPOCH, INVALID_ROW_SEQUENCE_NUMBERS = 3101, 3102, 3103
AUTHORIZATION_ERROR = 901
#: A row the transaction wrote was committed by another transaction since it started (`TransactionLockConflict`):
#: a compare-and-set that lost the race at commit rather than at the call, so a conflict as 3100 is.
TRANSACTION_LOCK_CONFLICT = 1700
#: Cypress' `ConcurrentTransactionLockConflict` (`yt/yt/client/cypress_client/public.h`): a lock another transaction
#: holds (`yt/yt/server/master/cypress_server/cypress_manager.cpp`, `CheckLock`).
CONCURRENT_TRANSACTION_LOCK_CONFLICT = 402


def translate_error(err: YtError, what: str, token: str | None) -> ClusterError:
    """Our error for a `yt.wrapper` error: the class by YT error code, the message naming `what`.

    `token`: the token this process sent, None when it had none; an authentication error without one is a
    `MissingTokenError` (where Spark tasks meet it, `streaming_core.cluster.errors.on_executor` names the executors).
    """
    if err.is_authentication_error() and not token:
        return MissingTokenError(what)
    message = without_secret(f"{what}: {_messages(err)}", token)
    if err.is_authentication_error():
        return AuthenticationError(message)
    if err.is_resolve_error():
        return NoSuchPathError(message)
    if err.is_already_exists():
        return AlreadyExistsError(message)
    if err.contains_code(CONSUMER_OFFSET_CONFLICT) or err.contains_code(TRANSACTION_LOCK_CONFLICT):
        return ConflictError(message)
    for code, error in ((ZOMBIE_EPOCH, ZombieEpochError), (INVALID_EPOCH, InvalidEpochError),
                        (INVALID_ROW_SEQUENCE_NUMBERS, SequenceNumberError)):
        if err.contains_code(code):
            return error(message)
    if not_registered(err):
        return NotRegisteredError(message)
    if err.contains_code(AUTHORIZATION_ERROR):
        return AccessDeniedError(message)
    return ClusterError(message)


def not_registered(err: YtError) -> bool:
    """A consumer not registered for the queue (or a registration the proxy's cache does not see yet)."""
    return bool(err.find_matching_error(predicate=_is_not_registered))


def _is_not_registered(err: YtError) -> bool:
    return int(err.code) == AUTHORIZATION_ERROR and "not registered" in err.message


def _messages(err: YtError | Mapping[str, Any]) -> str:
    """The chain of error messages and codes, without the request details (headers, params)."""
    if isinstance(err, Mapping):
        err = YtError(message=err.get("message", ""), code=err.get("code", 1),
                      inner_errors=err.get("inner_errors"))
    own = "" if isinstance(err, yt.YtResponseError) else f"{err.message} (code {err.code})"
    inner = "; ".join(_messages(e) for e in err.inner_errors)
    return ": ".join(part for part in (own, inner) if part)
