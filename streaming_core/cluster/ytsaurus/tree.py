"""The path tree over YTsaurus: nodes, attributes and documents, each call one `yt.wrapper` call."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from ..base import TABLE
from ..errors import SchemaError
from ..schema import TableSchema
from ..yson_values import plain


class TreeMixin:
    """`exists`, `create`, `remove`, `move`, `list`, `get` and `set` of `YtsaurusCluster`."""

    _client: Any
    _errors: Callable[[str], AbstractContextManager[None]]

    def exists(self, path: str) -> bool:
        with self._errors(path):
            return bool(self._client.exists(path))

    def create(
        self, node_type: str, path: str, *, recursive: bool = False, ignore_existing: bool = False,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        """Create a node; a dynamic table is also mounted and waited for, so it is usable on return."""
        attrs = dict(attributes or {})
        if node_type == TABLE and "schema" not in attrs:
            raise SchemaError(f"{path}: a table needs a 'schema' attribute")
        if "schema" in attrs:
            attrs["schema"] = TableSchema.from_yt(attrs["schema"]).to_yt()
        with self._errors(path):
            self._client.create(node_type, path, recursive=recursive, ignore_existing=ignore_existing,
                                attributes=attrs)
            if node_type == TABLE and attrs.get("dynamic"):
                self._client.mount_table(path, sync=True)

    def remove(self, path: str, *, recursive: bool = False, force: bool = False) -> None:
        with self._errors(path):
            self._client.remove(path, recursive=recursive, force=force)

    def move(self, source: str, destination: str, *, force: bool = False) -> None:
        with self._errors(source):
            self._client.move(source, destination, force=force)

    def list(self, path: str) -> list[str]:
        with self._errors(path):
            return sorted(str(name) for name in self._client.list(path))

    def get(self, path: str) -> Any:
        with self._errors(path):
            return plain(self._client.get(path))

    def set(self, path: str, value: Any) -> None:
        with self._errors(path):
            self._client.set(path, value)
