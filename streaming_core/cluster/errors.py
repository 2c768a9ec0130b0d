"""Errors of the cluster interface. Each names the path (and the row, column or partition) at fault."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class ClusterError(Exception):
    """Base class of everything the cluster interface raises on purpose."""


class NoSuchPathError(ClusterError):
    """The node does not exist (YTsaurus error code 500)."""


class AlreadyExistsError(ClusterError):
    """The node exists and `ignore_existing` was not given."""


class SchemaError(ClusterError):
    """Wrong table kind, a schema that does not fit, or a value of the wrong type."""


class RowError(SchemaError):
    """One row of a write does not fit (`row`: its 0-based index in the rows given). The message names it
    `row N`; `at(label)` says the same with the caller's own name for that row (`input line 7`)."""

    def __init__(self, path: str, row: int, problem: str) -> None:
        self.path, self.row, self.problem = path, row, problem
        super().__init__(self.at(f"row {row}"))

    def at(self, label: str) -> str:
        return f"{self.path}: {label}{self.problem}"


class ConflictError(ClusterError):
    """A compare-and-set failed: the stored consumer offset is not the expected `old_offset` (YTsaurus: 3100 at the
    call), or another transaction committed a row this one wrote since it started (YTsaurus: 1700 at commit)."""


class TrimmedRowsError(ClusterError):
    """Part of a requested row range was trimmed before it could be read."""

    @classmethod
    def of(cls, path: str, tablet: int, lower: int, upper: int, trimmed: int) -> TrimmedRowsError:
        """The error for rows `[lower, upper)` of a partition whose rows below `trimmed` are gone (every backend's)."""
        return cls(f"{path}: partition {tablet}, rows [{lower}, {min(trimmed, upper)}) of the requested range "
                   f"[{lower}, {upper}) were trimmed before they were read")


class BeyondQueueEndError(ClusterError):
    """An offset (a checkpoint's or a consumer's) lies past the queue's last row: the queue was recreated under the
    same path, or the offset is another queue's of that path. Reading or acknowledging on would skip the rows
    written later below it, so nothing reads past it and nothing moves a consumer there (Kafka's `failOnDataLoss`)."""


class QueueReshardedError(ClusterError):
    """A queue's tablets changed in a way a running query cannot follow: partitions its checkpoint has read are gone
    (the queue was resharded to fewer tablets). Tablets added to a queue are followed without this error."""


class UntrimmedTabletsError(ClusterError):
    """A reshard to fewer tablets would drop tablets that still hold rows: like YTsaurus, only tablets whose every row
    is trimmed can be removed (rows are never moved between tablets)."""

    @classmethod
    def of(cls, path: str, tablet_count: int, untrimmed: dict[int, tuple[int, int]]) -> UntrimmedTabletsError:
        """The error for resharding `path` to `tablet_count` tablets while `untrimmed` (`{tablet: (trimmed, total)}`)
        still hold rows `[trimmed, total)`."""
        held = ", ".join(f"tablet {t} rows [{trimmed}, {total})" for t, (trimmed, total) in sorted(untrimmed.items()))
        first = min(untrimmed)
        return cls(f"{path}: cannot reshard to {tablet_count} tablets: the tablets it would remove still hold rows "
                   f"({held}); nothing changed. Only fully trimmed tablets can be removed: let every consumer read "
                   f"them, trim them (opsd queue trim {path} --partition {first} --count {untrimmed[first][1]}), then "
                   f"reshard again")


class NotRegisteredError(ClusterError):
    """The consumer is not registered for the queue."""


class AccessDeniedError(ClusterError):
    """The user lacks a permission on a node (YTsaurus' `AuthorizationError`, 901, other than a consumer not
    registered): the message names the user, the permission and the node."""


class InvalidUriError(ClusterError):
    """A cluster URI that names no known backend."""


class VitalConsumerError(ClusterError):
    """A trim would drop rows that a consumer registered as vital has not read yet."""


class UnreachableClusterError(ClusterError):
    """The cluster cannot be reached at all (the proxy does not resolve, or refuses connections)."""


class YsonBindingsError(ClusterError):
    """The `ytsaurus-yson` bindings, which the YTsaurus backend needs to parse and write rows, cannot be loaded."""


#: How Spark's executors get a YTsaurus token, per engine. They read it from their own environment as the driver does
#: (`YT_TOKEN`, or a file named by `YT_TOKEN_PATH`); Spark hands them nothing of the driver's.
EXECUTOR_TOKEN_HOWTO = (
    "local[*]: the driver's own environment; "
    "local-cluster and standalone: YT_TOKEN (or YT_TOKEN_PATH, a file holding it) in the environment of every "
    "worker before it starts (e.g. its conf/spark-env.sh), or spark.executorEnv.YT_TOKEN_PATH=<a token file present "
    "on every worker host>; "
    "Kubernetes: YT_TOKEN from a Secret in the executor pod template (the chart's ytToken.existingSecret does it)")


class AuthenticationError(ClusterError):
    """The cluster refused the request's credentials: a token it does not accept (YTsaurus error code 900)."""


class MissingTokenError(AuthenticationError):
    """The cluster asks for a token and this process has none (YTsaurus error 900 without a token sent)."""

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(f"{what}: {self.problem()}")

    def problem(self) -> str:
        return ("the YTsaurus proxy cannot authenticate the request: it asks for a token and this process has none "
                "(YT_TOKEN, YT_TOKEN_PATH and ~/.yt/token are all empty)")


class ExecutorTokenError(MissingTokenError):
    """A task on a Spark executor (a source's `read()`, a sink's `write()`) found no YTsaurus token: the executors
    have none. The message says how to give them one on each engine (`EXECUTOR_TOKEN_HOWTO`)."""

    def problem(self) -> str:
        return ("the Spark executors have no YTsaurus token (the driver's own token never reaches them: executors "
                f"read YT_TOKEN or YT_TOKEN_PATH from their own environment). Give them one - {EXECUTOR_TOKEN_HOWTO}")


@contextlib.contextmanager
def on_executor() -> Iterator[None]:
    """Around the work of a Spark task: a missing token there is the executors' (`ExecutorTokenError`)."""
    try:
        yield
    except MissingTokenError as e:
        raise ExecutorTokenError(e.what) from None


class ProducerEpochError(ClusterError):
    """A `push_queue_producer` named an epoch other than its session's: YTsaurus refuses it, nothing is written."""


class ZombieEpochError(ProducerEpochError):
    """The push's epoch is older than the session's: the session was created again since (a task retried elsewhere),
    so this writer is a zombie and is fenced off (YTsaurus `ZombieEpoch`, 3102)."""


class InvalidEpochError(ProducerEpochError):
    """The push's epoch is newer than the session's, which no session creation returned (YTsaurus `InvalidEpoch`,
    3101)."""


class SequenceNumberError(ClusterError):
    """A push's sequence numbers are missing, negative or not strictly increasing (YTsaurus
    `InvalidRowSequenceNumbers`, 3103); nothing is written."""


class NoSuchProducerSessionError(ClusterError):
    """A push names a producer session that was never created (or was removed)."""
