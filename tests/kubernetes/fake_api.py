"""A fake Kubernetes API server on loopback, for the launchers' state-machine tests.

It serves the few endpoints the official client calls -- API discovery of a group/version,
custom objects (get, list, create, delete; Kueue's LocalQueues among them; a get of a
cluster-scoped one, such as a ClusterServingRuntime), pod list (by label or
by name, with the containers' statuses), pod log, and ``SelfSubjectAccessReview`` -- over real
HTTP, so the tests exercise the client, its serialisation and our error handling exactly as
against a cluster. It is not a cluster: no controller runs; a test scripts the ``status`` an
object shows on successive reads, and which access reviews are denied.

Where a test gives a kind a schema (:meth:`FakeKubernetesApi.serve_schema`: the fields an older
CRD knows, written by the test), creates and replaces treat unknown fields as the API server
does: ``fieldValidation=Strict`` refuses them (400, ``strict decoding error: unknown field
"spec.x"``), otherwise they are pruned and the rest is stored (with a warning). ``dryRun=All``
validates and stores nothing; ``metadata.generateName`` is honoured.
"""

from __future__ import annotations

import copy
import http.server
import itertools
import json
import re
import threading
import urllib.parse
import uuid
from collections.abc import Callable
from pathlib import Path

import yaml
from kubernetes import client

from kfstack.kubernetes.resources import KINDS, ResourceKind

# The LocalQueues the manifests put in a namespace (what a namespace set up by them has).
SHIPPED_LOCAL_QUEUES = Path(__file__).parents[2] / "manifests" / "base" / "namespaced" / "local-queues.yaml"

_CUSTOM = re.compile(
    r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?$"
)
_DISCOVERY = re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)$")
# A cluster-scoped custom object (a ClusterServingRuntime): kept under the namespace "".
_CLUSTER_SCOPED = re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/(?P<plural>[^/]+)/(?P<name>[^/]+)$")
_PODS = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods(?:/(?P<name>[^/]+)/log)?$")
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
# Kueue is installed on the fake cluster whatever ``served`` says about the launched kinds.
KUEUE_GROUP = "kueue.x-k8s.io"


def _matches(labels: dict, selector: str | None) -> bool:
    if not selector:
        return True
    for term in selector.split(","):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


def _unknown_fields(obj, schema: dict | None, path: str = "") -> list[str]:
    """The fields of ``obj`` that ``schema`` does not know, as the API server names them
    (``spec.a``, ``spec.list[0].b``); none without a schema."""
    if schema is None or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    known = schema.get("properties")
    if not path:  # the root: every object has these
        known = {
            **(known or {}),
            "apiVersion": {},
            "kind": {},
            "metadata": {"x-kubernetes-preserve-unknown-fields": True},
        }
    unknown = []
    if isinstance(obj, dict) and known is not None:
        for key, value in obj.items():
            where = f"{path}.{key}" if path else key
            if key not in known:
                unknown.append(where)
            else:
                unknown.extend(_unknown_fields(value, known[key], where))
    elif isinstance(obj, list) and "items" in schema:
        for i, item in enumerate(obj):
            unknown.extend(_unknown_fields(item, schema["items"], f"{path}[{i}]"))
    return unknown


def _pruned(obj, schema: dict | None, root: bool = True):
    """``obj`` without the fields ``schema`` does not know (what the API server stores)."""
    if schema is None or schema.get("x-kubernetes-preserve-unknown-fields"):
        return obj
    known = schema.get("properties")
    if root:
        known = {
            **(known or {}),
            "apiVersion": {},
            "kind": {},
            "metadata": {"x-kubernetes-preserve-unknown-fields": True},
        }
    if isinstance(obj, dict) and known is not None:
        return {key: _pruned(value, known[key], False) for key, value in obj.items() if key in known}
    if isinstance(obj, list) and "items" in schema:
        return [_pruned(item, schema["items"], False) for item in obj]
    return obj


class FakeKubernetesApi:
    """In-memory objects behind a loopback HTTP server (use as a context manager).

    Attributes:
        objects: ``(plural, namespace, name)`` -> stored object.
        cluster_objects: ``(plural, name)`` -> a cluster-scoped object (read-only here).
        statuses: ``name`` -> statuses the object shows on its next reads, one per read (the
            last one sticks).
        pods: Pods the list endpoint returns (``{"name", "namespace", "labels",
            "container_statuses"}``).
        logs: ``(namespace, pod name)`` -> the pod's log text.
        requests: ``(method, path)`` of every request but a dry run, in order.
        on_read: Called with the object name on every read of a custom object but a LocalQueue
            (e.g. to send this process SIGTERM mid-run).
        conflict_on_create: The next create first stores the body (as a concurrent creator
            would) and answers 409.
        served: ``group/version`` -> resource plurals the server serves (discovery answers
            with them; objects of any other kind are 404, as on a cluster without that CRD).
            ``None`` (the default): every custom object is served, and discovery lists every
            kind kfstack launches.
        forbidden: Resource plurals every request on which answers 403 (RBAC lacks them).
        denied: ``(verb, group, resource, subresource, namespace)`` an access review says is
            not allowed (``group`` empty for the core group, ``subresource`` empty for none);
            every other one is allowed.
        reviews: The ``resourceAttributes`` of every access review, in order.
        schemas: Resource plural -> the structural schema its CRD has (``properties``,
            ``items``, ``x-kubernetes-preserve-unknown-fields``); a kind without one keeps
            every field.
        dry_runs: ``(path, body)`` of every dry-run create or replace, in order (not in
            ``requests``: a dry run creates nothing).
        field_validation: The ``fieldValidation`` of every create and replace (dry runs too),
            in order; empty where none was asked for.
        pruned: ``path: field`` of every unknown field pruned from a stored object.
        dry_run_refusals: plural -> ``(status, reason, message)`` answered to every dry run of
            that kind that passes the schema check (an admission webhook's refusal, say).
    """

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict] = {}
        self.cluster_objects: dict[tuple[str, str], dict] = {}
        self.statuses: dict[str, list[dict]] = {}
        self.pods: list[dict] = []
        self.logs: dict[tuple[str, str], str] = {}
        self.requests: list[tuple[str, str]] = []
        self.on_read: Callable[[str], None] | None = None
        self.conflict_on_create = False
        self.served: dict[str, set[str]] | None = None
        self.forbidden: set[str] = set()
        self.denied: set[tuple[str, str, str, str, str]] = set()
        self.reviews: list[dict] = []
        self.schemas: dict[str, dict] = {}
        self.dry_runs: list[tuple[str, dict]] = []
        self.field_validation: list[str] = []
        self.pruned: list[str] = []
        self.dry_run_refusals: dict[str, tuple[int, str, str]] = {}
        self._versions = itertools.count(1)
        self._lock = threading.Lock()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        # A short poll: shutdown() waits for the loop to look (0.5 s by default, per test).
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    # -- test-facing helpers --------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def api_client(self) -> client.ApiClient:
        configuration = client.Configuration(host=self.url)
        configuration.retries = False
        return client.ApiClient(configuration)

    def put(self, plural: str, namespace: str, obj: dict) -> None:
        """Stores ``obj`` as if an earlier attempt had created it."""
        stored = copy.deepcopy(obj)
        stored["metadata"].setdefault("uid", str(uuid.uuid4()))
        stored["metadata"].setdefault("generation", 1)
        stored["metadata"]["resourceVersion"] = str(next(self._versions))
        stored["metadata"]["namespace"] = namespace
        self.objects[(plural, namespace, stored["metadata"]["name"])] = stored

    def put_cluster_scoped(self, plural: str, obj: dict) -> None:
        """Stores a cluster-scoped ``obj`` (a ClusterServingRuntime applied by the cluster's
        admin) in :attr:`cluster_objects`; only a GET reads it."""
        self.cluster_objects[(plural, obj["metadata"]["name"])] = copy.deepcopy(obj)

    def put_local_queues(self, namespace: str) -> list[str]:
        """Puts the LocalQueues the manifests ship into ``namespace``; returns their names."""
        queues = list(yaml.safe_load_all(SHIPPED_LOCAL_QUEUES.read_text()))
        for queue in queues:
            self.put("localqueues", namespace, queue)
        return [queue["metadata"]["name"] for queue in queues]

    def serve_only(self, *kinds: ResourceKind) -> None:
        """The API server serves these kinds' group/versions and no other custom resource."""
        self.served = {}
        for kind in kinds:
            self.served.setdefault(kind.api_version, set()).add(kind.plural)

    def serve_schema(self, plural: str, schema: dict) -> None:
        """``plural``'s CRD has ``schema`` (its ``openAPIV3Schema``, as small as a test needs:
        ``apiVersion``, ``kind`` and ``metadata`` are always known)."""
        self.schemas[plural] = schema

    def add_pod(
        self,
        name: str,
        namespace: str,
        labels: dict | None = None,
        log: str = "",
        container_statuses: list[dict] | None = None,
    ) -> None:
        """A pod the list endpoint returns; ``container_statuses`` become its
        ``status.containerStatuses`` (e.g. a terminated container's message)."""
        self.pods.append(
            {
                "name": name,
                "namespace": namespace,
                "labels": labels or {},
                "container_statuses": container_statuses or [],
            }
        )
        self.logs[(namespace, name)] = log

    def count(self, method: str, fragment: str = "") -> int:
        return sum(1 for m, p in self.requests if m == method and fragment in p)

    def created(self) -> list[str]:
        """The path of every create but an access review's, in order."""
        return [p for m, p in self.requests if m == "POST" and p != ACCESS_REVIEWS]

    def permissions_used(self) -> set[tuple[str, str, str, str, str]]:
        """``(verb, group, resource, subresource, namespace)`` of every namespaced request made,
        in RBAC's terms (a GET of a collection is a list, a PUT an update...): what a Role must
        grant for them. Discovery and access reviews need none (system:discovery and
        system:basic-user grant them to every client)."""
        used = set()
        for method, path in self.requests:
            if m := _PODS.match(path):
                named = bool(m["name"])
                used.add(("get" if named else "list", "", "pods", "log" if named else "", m["ns"]))
            elif m := _CUSTOM.match(path):
                on_one = {"GET": "get", "PUT": "update", "DELETE": "delete"}
                verbs = on_one if m["name"] else {"GET": "list", "POST": "create"}
                used.add((verbs[method], m["group"], m["plural"], "", m["ns"]))
        return used

    def __enter__(self) -> FakeKubernetesApi:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- the server ----------------------------------------------------------------------------

    def _read(self, key: tuple[str, str, str]) -> dict | None:
        obj = self.objects.get(key)
        if obj is None:
            return None
        script = self.statuses.get(key[2])
        if script:
            obj["status"] = script.pop(0) if len(script) > 1 else script[0]
        return copy.deepcopy(obj)

    def _handler(self):
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def _reply(self, code: int, body, content_type: str = "application/json") -> None:
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, reason: str, message: str) -> None:
                self._reply(
                    code,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "reason": reason,
                        "message": message,
                        "code": code,
                    },
                )

            def _route(self, method: str) -> None:
                parsed = urllib.parse.urlparse(self.path)
                query = urllib.parse.parse_qs(parsed.query)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                dry_run = query.get("dryRun", [""])[0] == "All"
                if dry_run:
                    fake.dry_runs.append((parsed.path, copy.deepcopy(body)))
                else:
                    fake.requests.append((method, parsed.path))
                if m := _PODS.match(parsed.path):
                    return self._pods(method, m, query)
                if parsed.path == ACCESS_REVIEWS and method == "POST":
                    if "selfsubjectaccessreviews" in fake.forbidden:  # a cluster without system:basic-user
                        return self._status(403, "Forbidden", "selfsubjectaccessreviews is forbidden")
                    return self._access_review(body)
                if m := _DISCOVERY.match(parsed.path):
                    return self._discovery(m)
                m = _CUSTOM.match(parsed.path)
                if not m and method == "GET" and (scoped := _CLUSTER_SCOPED.match(parsed.path)):
                    return self._cluster_scoped(scoped)
                if not m:
                    return self._status(404, "NotFound", f"no route {parsed.path}")
                if m["plural"] in fake.forbidden:
                    return self._status(403, "Forbidden", f"{m['plural']} is forbidden")
                if (
                    fake.served is not None
                    and m["group"] != KUEUE_GROUP
                    and m["plural"] not in fake.served.get(f"{m['group']}/{m['version']}", ())
                ):
                    return self._status(404, "NotFound", "the server could not find the requested resource")
                key_prefix = (m["plural"], m["ns"])
                if m["name"] is None and method == "GET":
                    selector = query.get("labelSelector", [None])[0]
                    with fake._lock:
                        items = [
                            copy.deepcopy(o)
                            for (p, ns, _), o in fake.objects.items()
                            if (p, ns) == key_prefix and _matches(o["metadata"].get("labels", {}), selector)
                        ]
                    return self._reply(
                        200, {"apiVersion": f"{m['group']}/{m['version']}", "kind": "List", "items": items}
                    )
                if method in ("POST", "PUT"):
                    fake.field_validation.append(query.get("fieldValidation", [""])[0])
                    unknown = _unknown_fields(body, fake.schemas.get(m["plural"]))
                    if unknown and query.get("fieldValidation", [""])[0] == "Strict":
                        # apimachinery's strict decoding error, as a 400 BadRequest Status.
                        fields = ", ".join(f'unknown field "{field}"' for field in unknown)
                        kind = body.get("kind", "")
                        return self._status(
                            400,
                            "BadRequest",
                            f'{kind} in version "{m["version"]}" cannot be handled as a {kind}: '
                            f"strict decoding error: {fields}",
                        )
                    if unknown:
                        body = _pruned(body, fake.schemas[m["plural"]])
                        if not dry_run:
                            fake.pruned.extend(f"{m['plural']}: {field}" for field in unknown)
                if dry_run and m["plural"] in fake.dry_run_refusals:
                    return self._status(*fake.dry_run_refusals[m["plural"]])
                if dry_run and method == "POST":
                    created = copy.deepcopy(body)
                    if not created["metadata"].get("name"):
                        created["metadata"]["name"] = created["metadata"].get("generateName", "") + "x7k2p"
                    return self._reply(201, created)
                if dry_run:
                    return self._reply(200, copy.deepcopy(body))
                if m["name"] is None and method == "POST":
                    return self._create(key_prefix, body)
                key = (*key_prefix, m["name"])
                if method == "GET":
                    # The hook plays the launched objects' controllers; Kueue's queues have none.
                    if fake.on_read is not None and m["group"] != KUEUE_GROUP:
                        fake.on_read(m["name"])
                    with fake._lock:
                        obj = fake._read(key)
                    if obj is None:
                        return self._status(404, "NotFound", f"{m['plural']} {m['name']} not found")
                    return self._reply(200, obj)
                if method == "PUT":
                    return self._replace(key, body)
                if method == "DELETE":
                    with fake._lock:
                        obj = fake.objects.pop(key, None)
                    if obj is None:
                        return self._status(404, "NotFound", f"{m['plural']} {m['name']} not found")
                    return self._reply(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
                return self._status(405, "MethodNotAllowed", method)

            def _cluster_scoped(self, m) -> None:
                if m["plural"] in fake.forbidden:
                    return self._status(403, "Forbidden", f"{m['plural']} is forbidden")
                with fake._lock:
                    obj = copy.deepcopy(fake.cluster_objects.get((m["plural"], m["name"])))
                if obj is None:
                    return self._status(404, "NotFound", f"{m['plural']} {m['name']} not found")
                return self._reply(200, obj)

            def _create(self, key_prefix, body) -> None:
                if not body["metadata"].get("name"):
                    body["metadata"]["name"] = body["metadata"].get("generateName", "") + uuid.uuid4().hex[:5]
                name = body["metadata"]["name"]
                key = (*key_prefix, name)
                with fake._lock:
                    if fake.conflict_on_create:
                        fake.conflict_on_create = False
                        fake.put(key_prefix[0], key_prefix[1], body)
                        return self._status(409, "AlreadyExists", f"{name} already exists")
                    if key in fake.objects:
                        return self._status(409, "AlreadyExists", f"{name} already exists")
                    fake.put(key_prefix[0], key_prefix[1], body)
                    return self._reply(201, copy.deepcopy(fake.objects[key]))

            def _replace(self, key, body) -> None:
                """A replace as the API server does it: optimistic concurrency on
                resourceVersion; a changed spec bumps metadata.generation; status is kept."""
                with fake._lock:
                    current = fake.objects.get(key)
                    if current is None:
                        return self._status(404, "NotFound", f"{key[0]} {key[2]} not found")
                    if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                        return self._status(409, "Conflict", "the object has been modified")
                    replaced = copy.deepcopy(body)
                    replaced["metadata"].update({k: current["metadata"][k] for k in ("uid", "generation")})
                    if replaced.get("spec") != current.get("spec"):
                        replaced["metadata"]["generation"] += 1
                    if "status" in current:
                        replaced["status"] = current["status"]
                    fake.put(key[0], key[1], replaced)
                    return self._reply(200, copy.deepcopy(fake.objects[key]))

            def _access_review(self, body) -> None:
                """Answers as the API server does (authorization.k8s.io/v1): the review sent back
                with its ``status``; ``allowed`` unless the test denied those attributes."""
                attributes = body["spec"]["resourceAttributes"]
                fake.reviews.append(attributes)
                asked = (
                    attributes.get("verb", ""),
                    attributes.get("group", ""),
                    attributes.get("resource", ""),
                    attributes.get("subresource", ""),
                    attributes.get("namespace", ""),
                )
                allowed = asked not in fake.denied
                return self._reply(
                    201,
                    {
                        **body,
                        "metadata": {},
                        "status": {"allowed": allowed, **({} if allowed else {"reason": ""})},
                    },
                )

            def _discovery(self, m) -> None:
                group_version = f"{m['group']}/{m['version']}"
                served = fake.served
                if served is None:
                    served = {}
                    for kind in KINDS.values():
                        served.setdefault(kind.api_version, set()).add(kind.plural)
                plurals = served.get(group_version)
                if plurals is None:
                    return self._status(404, "NotFound", "the server could not find the requested resource")
                resources = [
                    {"name": plural, "namespaced": True, "kind": plural, "verbs": ["create", "get", "list"]}
                    for plural in sorted(plurals)
                ]
                return self._reply(
                    200, {"kind": "APIResourceList", "groupVersion": group_version, "resources": resources}
                )

            def _pods(self, method, m, query) -> None:
                if method != "GET":
                    return self._status(405, "MethodNotAllowed", method)
                if m["name"]:
                    if (m["ns"], m["name"]) not in fake.logs:
                        return self._status(404, "NotFound", f"pod {m['name']} not found")
                    lines = fake.logs[(m["ns"], m["name"])].splitlines()
                    tail = int(query.get("tailLines", [len(lines)])[0])
                    return self._reply(200, "\n".join(lines[-tail:]) + "\n", "text/plain")
                selector = query.get("labelSelector", [None])[0]
                # The one field selector the launcher uses: metadata.name=<pod>.
                field_selector = query.get("fieldSelector", [None])[0]
                items = [
                    {
                        "metadata": {"name": p["name"], "namespace": p["namespace"], "labels": p["labels"]},
                        "status": {"containerStatuses": p["container_statuses"]},
                    }
                    for p in fake.pods
                    if p["namespace"] == m["ns"]
                    and _matches(p["labels"], selector)
                    and _matches({"metadata.name": p["name"]}, field_selector)
                ]
                return self._reply(
                    200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}
                )

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def do_PUT(self) -> None:
                self._route("PUT")

            def do_DELETE(self) -> None:
                self._route("DELETE")

        return Handler
