"""The YTsaurus backend (`yt://proxy`): the cluster interface over a real YTsaurus, through `ytsaurus-client`.

Every method is one or a few `yt.wrapper` calls with the same names; this package adds what the
interface promises on top of YTsaurus: rows validated against the table schema before anything is sent
(so a bad row writes nothing), Arrow in and out, YT errors mapped to `streaming_core.cluster.errors`,
bounded reads, and a tablet transaction whose lookups see its own writes (YTsaurus lookups read a
snapshot, not the transaction's writes).

`YtsaurusCluster` is composed of one mixin per role:
- `tree`: nodes, attributes, documents; `queues`: tablet counters, range reads, trimming;
- `consumers`: consumer tables, registrations, pull and advance; `tables`: row calls, static tables;
- `producers`: producer tables, sessions and pushes;
- `transactions`: tablet transactions;
- `client`: the `YtClient` factory and the wire arguments; `errors`: YT errors as ours;
- `rows`: values between Arrow and YSON rows in one explicit format, `rows.WIRE_FORMAT`, which every
  call that carries rows passes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from yt.common import YtError
from yt.packages.requests.exceptions import RequestException

from ...redaction import without_secret
from ..base import MAX_ROWS_PER_TABLET_TRANSACTION, Cluster, Transaction
from ..errors import NoSuchPathError, UnreachableClusterError
from ..schema import CONSUMER_SCHEMA
from ..uris import yt_uri
from .client import (
    WHERE_THE_URI_COMES_FROM,
    ClientFactory,
    ProxyPicker,
    client_token,
    default_client_factory,
    pick_heavy_proxy,
    pinned_client,
)
from .consumers import ConsumerMixin
from .errors import translate_error
from .producers import ProducerMixin
from .queues import QueueMixin
from .tables import TableMixin
from .transactions import YtTransaction
from .tree import TreeMixin

__all__ = [
    "CONSUMER_SCHEMA", "ClientFactory", "YtTransaction", "YtsaurusCluster", "default_client_factory",
    "translate_error",
]


class YtsaurusCluster(TreeMixin, QueueMixin, ConsumerMixin, ProducerMixin, TableMixin, Cluster):
    """The cluster at `proxy` (`hahn`, `localhost:8000`, `https://host:443`), with `token` or the client's own.

    `config` is laid over the client's own configuration (see `client`). Without `token` the client reads it as it
    always does (`YT_TOKEN`, `YT_TOKEN_PATH`, `~/.yt/token`), in each process. `pick_proxy` picks the proxy each
    tablet transaction is pinned to (`client.pick_heavy_proxy`).

    Notes
    -----
    Picklable: only proxy, an explicit token and the config are pickled; the `YtClient` is created on first use
    in each process, which is what lets Spark ship readers holding a cluster to its workers.
    The token never appears in `repr()` nor in the messages of raised errors.
    """

    max_rows_per_tablet_transaction = MAX_ROWS_PER_TABLET_TRANSACTION

    def __init__(
        self, proxy: str, *, token: str | None = None, config: dict[str, Any] | None = None,
        client_factory: ClientFactory = default_client_factory, pick_proxy: ProxyPicker = pick_heavy_proxy,
    ) -> None:
        self.proxy = proxy
        self.uri = yt_uri(proxy, config)
        self._token = token
        self._config = config
        self._client_factory = client_factory
        self._pick_proxy = pick_proxy
        self._client_instance: Any = None
        self._name: str | None = None

    def __repr__(self) -> str:
        return f"YtsaurusCluster(proxy={self.proxy!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"proxy": self.proxy, "token": self._token, "config": self._config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["proxy"], token=state["token"], config=state["config"])

    @property
    def _client(self) -> Any:
        if self._client_instance is None:
            self._client_instance = self._new_client()
        return self._client_instance

    def _new_client(self) -> Any:
        return self._client_factory(self.proxy, self._token, self._config)

    @property
    def name(self) -> str:  # type: ignore[override]
        """`//sys/@cluster_name` (what YTsaurus writes as `queue_cluster`), else the proxy."""
        if self._name is None:
            try:
                with self._errors("//sys/@cluster_name"):
                    self._name = str(self._client.get("//sys/@cluster_name"))
            except NoSuchPathError:
                self._name = self.proxy
        return self._name

    def close(self) -> None:
        self._client_instance = None

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Re-raise `yt.wrapper` errors as ours, the message naming `what` and free of the token."""
        try:
            yield
        except YtError as err:
            raise translate_error(err, what, self._known_token()) from None
        except (RequestException, OSError) as err:  # the transport failed after the client's retries
            reason = without_secret(str(err), self._known_token())
            raise UnreachableClusterError(f"{what}: YTsaurus proxy {self.proxy} failed: {type(err).__name__}: "
                                          f"{reason}; check {WHERE_THE_URI_COMES_FROM}") from None

    def _known_token(self) -> str | None:
        return self._token or (client_token(self._client_instance) if self._client_instance else None)

    def transaction(self) -> Transaction:
        """A tablet transaction on its own `YtClient`, so it never leaks into this object's calls, pinned to one
        proxy from `/hosts`: the proxy that starts a tablet transaction is the only one that knows it (see `client`)."""
        with self._errors("tablet transaction"):
            client = pinned_client(self._pick_proxy(self._client), self._client_factory, self._token, self._config)
            return YtTransaction(self, client, client.Transaction(type="tablet"))
