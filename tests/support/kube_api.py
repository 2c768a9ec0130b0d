"""A Kubernetes API server stand-in on loopback, for a real Spark driver in `k8s://` client mode, and a kubelet stand-in
that runs the executor pods Spark asks for as local processes, exactly as their specs say.

`KubeApi` serves, over plain HTTP, what Spark's Kubernetes scheduler backend calls through its fabric8 client with the
executor pod watcher off (`spark.kubernetes.executor.enableApiWatcher=false`: the stand-in serves no watches; Spark
polls instead): pods and config maps in one namespace (create, get, list by label selector, patch, delete one or by
label selector), an empty list of persistent volume claims, and watches that report nothing. It records every request,
and deleting an object deletes the objects whose `ownerReferences` name it, as Kubernetes' garbage collector does
(an object created with owners that are all gone is collected at once).

`Kubelet` starts each pending executor pod (and reports a pod started otherwise, such as the driver's, running): the
container's command (else the image's entrypoint) with its args; the image's environment, then the container's `env`
with `valueFrom` resolved (`secretKeyRef` from the given Secrets, `configMapKeyRef`, `fieldRef` of the pod's name,
namespace and IP); each volume materialized under one root that stands for every pod's filesystem (secrets and config
maps as files, `emptyDir` as a directory), and container paths in env values rewritten to it. The pod's IP is
127.0.0.1. Each pod's spec and output are kept in `logs` (`<pod>.pod.json`, `<pod>.log`). A pod deleted through the
API is killed; a process that ends sets its pod's phase.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

#: Collections the stand-in serves, by plural, with their kind.
KINDS = {"pods": "Pod", "configmaps": "ConfigMap", "persistentvolumeclaims": "PersistentVolumeClaim"}
PATH = re.compile(r"^/api/v1/namespaces/(?P<namespace>[^/]+)/(?P<plural>[a-z]+)(?:/(?P<name>[^/]+))?$")
POD_IP = "127.0.0.1"


def selected(labels: Mapping[str, str], selector: str) -> bool:
    """Whether `labels` match a label selector (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a`, `!a`)."""
    for term in re.findall(r"[^,(]+(?:\([^)]*\))?", selector):
        term = term.strip()
        if match := re.fullmatch(r"(\S+)\s+(in|notin)\s+\(([^)]*)\)", term):
            key, op, values = match.group(1), match.group(2), {v.strip() for v in match.group(3).split(",")}
            if (labels.get(key) in values) != (op == "in"):
                return False
        elif match := re.fullmatch(r"([^!=\s]+)\s*(==|=|!=)\s*(\S*)", term):
            key, op, value = match.groups()
            if (labels.get(key) == value) != (op != "!="):
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term and term not in labels:
            return False
    return True


def field_selected(obj: dict, selector: str) -> bool:
    """Whether `obj` matches a field selector of `metadata.name` / `metadata.namespace` equalities (what Spark uses)."""
    for term in filter(None, selector.split(",")):
        field, _, value = term.partition("=")
        if obj["metadata"].get(field.removeprefix("metadata.")) != value.lstrip("="):
            return False
    return True


def merge(target: dict, patch: dict) -> dict:
    """A JSON merge patch (RFC 7386), as for `application/merge-patch+json` and, for labels, strategic merges."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = value
    return target


def json_patch(target: dict, operations: list[dict]) -> dict:
    """A JSON patch (RFC 6902): add, replace and remove."""
    for op in operations:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
        node = target
        for part in parents:
            node = node.setdefault(part, {})
        if op["op"] == "remove":
            node.pop(last, None)
        else:
            node[last] = op["value"]
    return target


class KubeApi:
    """The API server stand-in; a context manager serving on `url` until the block ends."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.objects: dict[tuple[str, str], dict] = {}
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.RLock()
        self._versions = itertools.count(1)
        self._closed = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.block_on_close = False  # a watch holds its thread until `_closed`
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> KubeApi:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed.set()
        self._server.shutdown()
        self._server.server_close()

    def create(self, plural: str, obj: dict) -> dict:
        """Store a new object as the API server does (uid, resource version, namespace; a pod `Pending`)."""
        obj = json.loads(json.dumps(obj))
        meta = obj.setdefault("metadata", {})
        meta |= {"namespace": self.namespace, "uid": str(uuid.uuid4()), "resourceVersion": str(next(self._versions)),
                 "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        obj |= {"apiVersion": "v1", "kind": KINDS[plural]}
        if plural == "pods":
            obj.setdefault("status", {"phase": "Pending"})
        with self.lock:
            owners = {ref.get("uid") for ref in meta.get("ownerReferences") or []}
            if owners and not owners & {o["metadata"]["uid"] for o in self.objects.values()}:
                return obj  # its owners are gone: the garbage collector deletes it at once
            self.objects[(plural, meta["name"])] = obj
        return obj

    def get(self, plural: str, name: str) -> dict | None:
        with self.lock:
            return self.objects.get((plural, name))

    def list(self, plural: str, selector: str = "", fields: str = "") -> list[dict]:
        with self.lock:
            return [o for (p, _), o in self.objects.items() if p == plural and field_selected(o, fields)
                    and selected(o["metadata"].get("labels") or {}, selector)]

    def delete(self, plural: str, name: str) -> dict | None:
        """Delete an object and, as the garbage collector does, every object it owns (ownerReferences)."""
        with self.lock:
            obj = self.objects.pop((plural, name), None)
            if obj is not None:
                uid = obj["metadata"]["uid"]
                for (p, n), other in list(self.objects.items()):
                    if any(ref.get("uid") == uid for ref in other["metadata"].get("ownerReferences") or []):
                        self.delete(p, n)
            return obj

    def update(self, plural: str, name: str, change: Any) -> dict | None:
        with self.lock:
            obj = self.objects.get((plural, name))
            if obj is not None:
                change(obj)
                obj["metadata"]["resourceVersion"] = str(next(self._versions))
            return obj

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                """Quiet: the requests are recorded in `KubeApi.requests`."""

            def _reply(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, reason: str) -> None:
                self._reply(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                                   "reason": reason, "message": f"{reason}: {self.path}"})

            def _handle(self) -> None:
                url = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                api.requests.append((self.command, self.path))
                match = PATH.match(url.path)
                if not match or match["plural"] not in KINDS:
                    return self._status(404, "NotFound")
                plural, name = match["plural"], match["name"]
                query = {key: values[0] for key, values in parse_qs(url.query).items()}
                if query.get("watch") == "true":
                    return self._watch()
                if name is None:
                    if self.command == "POST":
                        return self._reply(201, api.create(plural, body))
                    items = api.list(plural, query.get("labelSelector", ""), query.get("fieldSelector", ""))
                    if self.command == "DELETE":
                        items = [api.delete(plural, o["metadata"]["name"]) for o in items]
                    elif self.command != "GET":
                        return self._status(405, "MethodNotAllowed")
                    return self._reply(200, {"kind": f"{KINDS[plural]}List", "apiVersion": "v1",
                                             "metadata": {"resourceVersion": str(next(api._versions))},
                                             "items": [o for o in items if o]})
                if self.command == "GET":
                    found = api.get(plural, name)
                elif self.command == "DELETE":
                    found = api.delete(plural, name)
                elif self.command == "PATCH":
                    patch = json_patch if "json-patch" in (self.headers.get("Content-Type") or "") else merge
                    found = api.update(plural, name, lambda obj: patch(obj, body))
                elif self.command == "PUT":
                    found = api.update(plural, name, lambda obj: obj.update(body))
                else:
                    return self._status(405, "MethodNotAllowed")
                return self._reply(200, found) if found else self._status(404, "NotFound")

            def _watch(self) -> None:
                """A watch that reports no event: held open until the stand-in stops (Spark polls instead)."""
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                api._closed.wait()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        return Handler


def rooted(root: Path, path: str) -> Path:
    """A container path inside the root that stands for every pod's filesystem."""
    return root / path.lstrip("/")


class Kubelet:
    """Runs the executor pods of `api` as local processes (see the module docstring); a context manager."""

    def __init__(self, api: KubeApi, root: Path, *, entrypoint: list[str], image_env: Mapping[str, str],
                 secrets: Mapping[str, Mapping[str, str]], logs: Path) -> None:
        self.api, self.root, self.entrypoint, self.image_env = api, root, entrypoint, dict(image_env)
        self.secrets, self.logs = secrets, logs
        self.processes: dict[str, subprocess.Popen] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Kubelet:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        for process in self.processes.values():
            self._kill(process)

    def environment(self, pod: dict, container: dict) -> dict[str, str]:
        """The container's environment: the image's, then its `env` (values resolved, container paths rooted)."""
        env = dict(self.image_env)
        mounts = [m["mountPath"] for m in container.get("volumeMounts") or []]
        for item in container.get("env") or []:
            env[item["name"]] = self._rooted_value(self._value(pod, item), mounts)
        return env

    def mount(self, pod: dict, container: dict) -> None:
        """Materialize the container's volume mounts under the root."""
        volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
        for mount in container.get("volumeMounts") or []:
            volume, target = volumes[mount["name"]], rooted(self.root, mount["mountPath"])
            target.mkdir(parents=True, exist_ok=True)
            if "secret" in volume:
                data, items = self.secrets[volume["secret"]["secretName"]], volume["secret"].get("items")
            elif "configMap" in volume:
                config_map = self.api.get("configmaps", volume["configMap"]["name"]) or {}
                data, items = config_map.get("data") or {}, volume["configMap"].get("items")
            else:
                continue  # emptyDir: the directory itself
            for item in items or [{"key": key, "path": key} for key in data]:
                (target / item["path"]).write_text(data[item["key"]])

    def _value(self, pod: dict, item: dict) -> str:
        source = item.get("valueFrom")
        if source is None:
            return item.get("value", "")
        if "secretKeyRef" in source:
            return self.secrets[source["secretKeyRef"]["name"]][source["secretKeyRef"]["key"]]
        if "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            return self.api.get("configmaps", ref["name"])["data"][ref["key"]]
        field = source["fieldRef"]["fieldPath"]
        return {"metadata.name": pod["metadata"]["name"], "metadata.namespace": pod["metadata"]["namespace"],
                "status.podIP": POD_IP}[field]

    def _rooted_value(self, value: str, mounts: list[str]) -> str:
        for mount in mounts:
            if value == mount or value.startswith(mount.rstrip("/") + "/"):
                return str(rooted(self.root, value))
        return value

    def _start(self, pod: dict) -> None:
        name = pod["metadata"]["name"]
        [container] = pod["spec"]["containers"]
        self.mount(pod, container)
        argv = [*(container.get("command") or self.entrypoint), *(container.get("args") or [])]
        (self.logs / f"{name}.pod.json").write_text(json.dumps(pod, indent=1))
        with (self.logs / f"{name}.log").open("w") as log:
            self.processes[name] = subprocess.Popen(argv, env=self.environment(pod, container), stdout=log,
                                                    stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True)
        self.running(name)

    def running(self, name: str) -> None:
        """Report the pod running and ready, as a kubelet does once its container started."""
        self.api.update("pods", name, lambda obj: obj.update(status={
            "phase": "Running", "podIP": POD_IP, "hostIP": POD_IP,
            "conditions": [{"type": "Ready", "status": "True"}]}))

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for pod in self.api.list("pods", "spark-role=executor"):
                if pod["metadata"]["name"] not in self.processes:
                    self._start(pod)
            for name, process in self.processes.items():
                if self.api.get("pods", name) is None:
                    self._kill(process)
                elif process.poll() is not None:
                    phase = "Succeeded" if process.returncode == 0 else "Failed"
                    self.api.update("pods", name, lambda obj, phase=phase: obj["status"].update(phase=phase))

    @staticmethod
    def _kill(process: subprocess.Popen) -> None:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

