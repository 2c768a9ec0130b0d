"""Permissions as a YTsaurus master checks them, for the users the stand-in's tokens name.

Each node may carry `@acl` (a list of ACEs: `{"action": "allow" | "deny", "subjects": [...], "permissions": [...]}`)
and `@inherit_acl` (true by default). A user's permission on a node comes from the ACEs of the node and its ancestors
up to the first that does not inherit, a `deny` winning over an `allow`; past the root, every user may read (what a
YTsaurus cluster's root ACL grants `everyone`), nothing else. `root` may do anything. Subjects: a user's name,
`users`, `everyone`. Refused: YTsaurus' `AuthorizationError` (901), "Access denied for user ...: ... permission for
node ... is not allowed by any matching ACE" (`yt/yt/server/master/security_server/security_manager.cpp`).

What each command needs, as YTsaurus checks it (`COMMAND_PERMISSIONS`; the rest in the commands): `get`, `list`,
`select_rows`, `lookup_rows`, `pull_queue`, `read_*`: read on the node; `set`, `insert_rows`, `delete_rows`,
`trim_rows`, `write_*`: write; `create`: write on the parent; `remove`: remove; `pull_consumer`: read on the
consumer, not on the queue (`client_impl.cpp` `DoPullConsumer` pulls the queue unauthenticated);
`register_queue_consumer`: `register_queue_consumer` on the queue (`DoRegisterQueueConsumer`);
`unregister_queue_consumer`: remove on the queue or the consumer (`DoUnregisterQueueConsumer`); `advance_consumer`:
write on the consumer (its client-side form writes the consumer's row); `get_tablet_infos`,
`list_queue_consumer_registrations`, `exists`: none.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any

from streaming_core.cluster.embedded import EmbeddedCluster, normalize_path
from streaming_core.cluster.errors import NoSuchPathError
from streaming_core.cluster.ytsaurus.errors import AUTHORIZATION_ERROR

from .errors import YtCodedError

ROOT = "root"
READ, WRITE, REMOVE, REGISTER_QUEUE_CONSUMER = "read", "write", "remove", "register_queue_consumer"
#: The subjects every user belongs to.
EVERYONE = frozenset({"users", "everyone"})

#: The user the command under way runs as.
SERVING_USER: contextvars.ContextVar[str] = contextvars.ContextVar("serving_user", default=ROOT)

#: Per command: the permission it needs and the parameter that names the node (the rest check in their handlers).
COMMAND_PERMISSIONS: dict[str, tuple[str, str]] = {
    "get": (READ, "path"), "list": (READ, "path"), "lookup_rows": (READ, "path"), "read_table": (READ, "path"),
    "read_file": (READ, "path"), "pull_queue": (READ, "queue_path"), "set": (WRITE, "path"),
    "insert_rows": (WRITE, "path"), "delete_rows": (WRITE, "path"), "trim_rows": (WRITE, "path"),
    "write_table": (WRITE, "path"), "write_file": (WRITE, "path"), "remove": (REMOVE, "path"),
    "pull_consumer": (READ, "consumer_path"), "pull_queue_consumer": (READ, "consumer_path"),
    "register_queue_consumer": (REGISTER_QUEUE_CONSUMER, "queue_path"),
    "advance_consumer": (WRITE, "consumer_path"), "advance_queue_consumer": (WRITE, "consumer_path"),
}


def access_denied(user: str, permission: str, path: str) -> YtCodedError:
    return YtCodedError(AUTHORIZATION_ERROR, f'Access denied for user "{user}": "{permission}" permission for node '
                                             f'{path} is not allowed by any matching ACE')


class Permissions:
    """The permission checks of one stand-in, over its storage."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster = cluster

    def allowed(self, user: str, permission: str, path: str) -> bool:
        """Whether `user` has `permission` on the node at `path` (a missing node: its nearest existing ancestor)."""
        if user == ROOT:
            return True
        subjects = {user, *EVERYONE}
        node = normalize_path(path.partition("/@")[0])
        verdict: bool | None = None
        while True:
            attributes = self._attributes(node)
            for ace in attributes.get("acl") or []:
                if permission in ace.get("permissions", []) and subjects & set(ace.get("subjects", [])):
                    if ace.get("action", "allow") == "deny":
                        return False
                    verdict = True
            if attributes.get("inherit_acl", True) is False:
                return bool(verdict)
            if node in ("/", "//") or "/" not in node.strip("/"):
                return bool(verdict) or permission == READ
            node = node.rsplit("/", 1)[0] or "//"

    def require(self, permission: str, path: str) -> None:
        """`AuthorizationError` (901) unless the user of the command under way has `permission` on `path`."""
        user = SERVING_USER.get()
        if not self.allowed(user, permission, path):
            raise access_denied(user, permission, normalize_path(path.partition("/@")[0]))

    def require_command(self, name: str, params: Mapping[str, Any]) -> None:
        """The check `COMMAND_PERMISSIONS` names for the command, if any (`create`: write on the parent)."""
        if name == "create" and params.get("path") is not None:
            self.require(WRITE, str(params["path"]).rsplit("/", 1)[0] or "//")
        elif name in COMMAND_PERMISSIONS and params.get(COMMAND_PERMISSIONS[name][1]) is not None:
            permission, key = COMMAND_PERMISSIONS[name]
            self.require(permission, str(params[key]))

    def _attributes(self, node: str) -> dict[str, Any]:
        try:
            return dict(self.cluster.get(f"{node}/@") or {}) if node not in ("/", "//") else {}
        except NoSuchPathError:
            return {}
