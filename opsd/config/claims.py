"""Claims across config files (issue 32): two opsd processes, each with its own config file, maybe on two hosts, never
run queries on one checkpoint location or one consumer (one would move or skip the other's rows). One config is
checked when it loads (`models.OpsdConfig`); across files, each pipeline of `opsd run` claims what it owns for as
long as it runs:

- its checkpoint location: local (or `file://`, or `yt:///` on the embedded cluster), the lock file `LOCK_NAME`
  inside it; in Cypress (`yt:///` on YTsaurus), the claim node `<location>/LOCK_NAME` (a `map_node` beside Spark's
  `offsets/` and `commits/`, which Spark never reads);
- its consumer: on the embedded cluster, a lock file under `<cluster root>/CLAIMS_FOLDER`; on YTsaurus, the claim
  node `<claims_root>/consumer-<digest>` (the config's `claims_root`, `//tmp/opsd-claims` by default: a consumer is a
  table whose attributes and folder another team may own, so its claim is not kept beside it), named by a digest of
  the consumer's path.

A local claim is an exclusive `flock` on the file, which the kernel releases when the process ends however it ends;
the file names the owner. A claim on YTsaurus is an exclusive Cypress lock on the claim node, held by a master
transaction of its own that opsd pings while it runs (`streaming_core.cluster.ytsaurus.claims`): its title names the
owner, and YTsaurus aborts it, lock and all, `ClaimTiming.timeout_seconds` (30 s) after the last ping of a process
that died. Either way a stale claim never blocks for long. A claim held by another process is refused naming both
pipelines and both config files (pid and host too). What another owner's lock file or transaction title says is read
as untrusted text (a few known keys, short strings, shown escaped).

A claim on YTsaurus can be lost while opsd runs (its transaction expired or was aborted: the cluster out of reach
for longer than the timeout, an administrator's abort); another opsd may hold it by then. `claimed` calls its
`on_lost` with the claim, once, from the pinger's thread: the daemon logs it, counts it and stops (see
`opsd.runtime.daemon`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opsd.config.models import OpsdConfig, checkpoint_key, consumer_key
from opsd.telemetry.terminal import printable
from streaming_core.checkpoint import CypressFiles, LocalFiles, checkpoint_files, yt_client
from streaming_core.cluster import resolve_uri
from streaming_core.options import CONSUMER_PATH

if TYPE_CHECKING:
    from streaming_core.cluster.ytsaurus.claims import ClaimTiming

#: The lock file (or Cypress claim node) inside a claimed checkpoint location (Spark reads only its own files and
#: folders there).
LOCK_NAME = "opsd.lock"
#: The folder under the embedded cluster's root that holds the consumers' claims.
CLAIMS_FOLDER = ".opsd-claims"
#: How a claim's transaction title begins on YTsaurus; the owner's JSON follows.
TITLE_PREFIX = "opsd claim "
# What is read of another owner's lock file or title: its few keys, each at most this long.
_OWNER_KEYS = ("pipeline", "config", "pid", "host")
_MAX_OWNER_FIELD = 256
_MAX_OWNER_BYTES = 4096


@dataclass(frozen=True)
class Claim:
    """What one pipeline claims: a checkpoint location or a consumer, and where the claim is held: a local lock file
    (`lock`), or a Cypress claim node on the YTsaurus cluster `cluster` (`node`)."""

    pipeline: str
    kind: str
    what: str
    lock: Path | None = None
    node: str | None = None
    cluster: str | None = None


def claims(config: OpsdConfig) -> list[Claim]:
    """The claims of the config's pipelines (watched queries claim nothing: they are another process's)."""
    cluster = resolve_uri(config.cluster)
    local = cluster.startswith("local://")
    found = []
    for pipeline in config.pipelines:
        if pipeline.checkpoint_location:
            # Where the files are, without connecting.
            files = checkpoint_files(pipeline.checkpoint_location, cluster, yt_client=lambda uri: None)
            what = checkpoint_key(pipeline.checkpoint_location)
            if isinstance(files, LocalFiles):
                found.append(Claim(pipeline.name, "checkpoint location", what, lock=files.root / LOCK_NAME))
            elif isinstance(files, CypressFiles):
                found.append(Claim(pipeline.name, "checkpoint location", what, node=f"{files.root}/{LOCK_NAME}",
                                   cluster=cluster))
        consumer = pipeline.source.options.get(CONSUMER_PATH) if pipeline.source.format == "yt" else None
        if consumer:
            what = consumer_key(consumer)
            name = "consumer-" + hashlib.sha256(what.encode()).hexdigest()[:32]
            where = ({"lock": Path(cluster.removeprefix("local://")) / CLAIMS_FOLDER / f"{name}.lock"} if local
                     else {"node": f"{config.claims_root}/{name}", "cluster": cluster})
            found.append(Claim(pipeline.name, "consumer", what, **where))
    return found


@contextlib.contextmanager
def claimed(config: OpsdConfig, config_path: str | Path, on_lost: Callable[[Claim], None] | None = None, *,
            timing: ClaimTiming | None = None, yt_client: Callable[[str], Any] = yt_client) -> Iterator[list[Claim]]:
    """Hold every claim of `config` while inside; a claim another process holds raises `ClaimError` naming every one
    refused (nothing is held then). `on_lost(claim)`: a claim on YTsaurus lost while held (called once per claim, from
    another thread); `timing`: its transaction's timeout and pings (None: `ClaimTiming()`); `yt_client(uri)`: a
    client for each such claim."""
    owner = {"config": str(Path(config_path).resolve()), "pid": os.getpid(), "host": socket.gethostname()}
    wanted = claims(config)
    with contextlib.ExitStack() as held:
        problems = []
        for claim in wanted:
            mine = {**owner, "pipeline": claim.pipeline}
            if claim.node is None:
                other = _take(claim, mine, held)
            else:
                other = _take_node(claim, mine, held, yt_client, timing, on_lost)
            if other is not None:
                problems.append(f"pipeline {claim.pipeline!r} of {owner['config']} and {other} share the {claim.kind} "
                                f"{claim.what}: each query needs its own (one would move or skip the other's rows)")
        if problems:
            raise ClaimError(Path(config_path), problems)
        yield wanted


class ClaimError(ValueError):
    """Claims held by another opsd; one line per claim refused."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path, self.problems = path, problems
        super().__init__(f"opsd config {path}: " + "; ".join(problems))


def _take(claim: Claim, owner: dict[str, object], held: contextlib.ExitStack) -> str | None:
    """Lock `claim`'s file and write `owner` into it (kept locked by `held`); None, or who holds it instead."""
    assert claim.lock is not None
    claim.lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(claim.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno not in (errno.EWOULDBLOCK, errno.EACCES):
            os.close(fd)
            raise
        try:
            return _owner(os.pread(fd, _MAX_OWNER_BYTES, 0))
        except OSError:
            return _owner(None)
        finally:
            os.close(fd)
    held.callback(os.close, fd)
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps(owner).encode())
    return None


def _take_node(claim: Claim, owner: dict[str, object], held: contextlib.ExitStack, client: Callable[[str], Any],
               timing: ClaimTiming | None, on_lost: Callable[[Claim], None] | None) -> str | None:
    """Lock `claim`'s Cypress node in a pinged transaction titled with `owner` (released by `held`); None, or who
    holds it instead."""
    # ytsaurus-client only when a YTsaurus cluster is used (its import reads the client's configuration patches)
    from streaming_core.cluster.ytsaurus.claims import ClaimHeldError, CypressClaim

    assert claim.node is not None and claim.cluster is not None
    lock = CypressClaim(client(claim.cluster), claim.node, TITLE_PREFIX + json.dumps(owner),
                        on_lost=lambda: on_lost(claim) if on_lost is not None else None, timing=timing)
    try:
        lock.take()
    except ClaimHeldError as e:
        text = e.holder[len(TITLE_PREFIX):] if e.holder and e.holder.startswith(TITLE_PREFIX) else None
        return _owner(text.encode()[:_MAX_OWNER_BYTES] if text is not None else None)
    held.callback(lock.release)
    return None


def _owner(text: bytes | None) -> str:
    """Who holds a claim, from what its lock file or transaction title says (untrusted: known keys only, short,
    escaped)."""
    try:
        document = json.loads((text or b"").decode("utf-8"))
    except ValueError:
        document = None
    if not isinstance(document, dict):
        return "another opsd (its claim does not say which)"
    fields = {key: printable(str(document.get(key, "?"))[:_MAX_OWNER_FIELD]) for key in _OWNER_KEYS}
    return f"pipeline {fields['pipeline']!r} of {fields['config']} (pid {fields['pid']} on {fields['host']})"
