"""Registration of a production model in Kubeflow Model Registry (optional, off by default).

A model that went into production (a rollout's ``first`` or ``promote``) can be recorded in a
Model Registry as a version of the registered model named like its InferenceService: the
version is named by the model's version (the run that trained it), its artifact points at the
directory KServe serves it from, and its metadata is the model's lineage (:mod:`kfstack.lineage`)
flattened to the scalars the registry stores. The registry's own Python client, ``model-registry``
(the ``registry`` extra), does the talking; it is imported only when a registration is asked
for, so compiling, and every image without the extra, never need it.

Registration is idempotent: a version already registered under the same name, with the same
artifact URI, is reported with its ids and not registered again (a retried task); one that an
interrupted attempt left without its artifact is completed; one with another URI is a conflict.

Authentication: the pod's service-account token
(:data:`~kfstack.kubernetes.naming.SERVICE_ACCOUNT_TOKEN_FILE`), when the file exists, goes as
``Authorization: Bearer`` -- what a Model Registry behind kube-rbac-proxy (Open Data Hub) or an
Istio gateway with a JWT policy checks; a registry that checks nothing ignores it. ``https://``
needs one (the client refuses a secure connection without a token).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import os
import urllib.parse
import warnings
from collections.abc import Coroutine, Iterator, Mapping
from typing import Any, TypeVar

from kfstack import contracts
from kfstack.errors import InvalidParameterError, PlatformNotAvailableError, RunFailedError
from kfstack.kubernetes.naming import SERVICE_ACCOUNT_TOKEN_FILE
from kfstack.lineage import Lineage
from kfstack.serving.canary import PROMOTE, ROLLBACK
from kfstack.serving.rollout import FIRST, SKIPPED, UNCHANGED

T = TypeVar("T")

# The rollout decisions after which the model is the one in production: only those register.
REGISTERED_DECISIONS = (FIRST, PROMOTE)
# What the deploy step may answer (``skipped``: deploy=false).
DECISIONS = (*REGISTERED_DECISIONS, ROLLBACK, UNCHANGED, SKIPPED)

INSTALL_HINT = "install kfstack[registry] (the model-registry client) in this step's image"
DEFAULT_PORTS = {"http": 80, "https": 443}
# Who a registration is by when model_registry_author is empty (and the pipelines' default).
DEFAULT_AUTHOR = "kfstack"

# The artifact is the model directory, registered with its format (KServe's name for it: onnx,
# sklearn, xgboost...). An ONNX model is versioned by the opset its graph imports: the exporter
# chooses it (torch's and tf2onnx's need not agree), so it is read from the file
# (:func:`onnx_opset`); another format's version is what the pipeline says, or none.
ONNX = "onnx"
ONNX_FILE = "model.onnx"
# Provenance fields the registry's UI links back to a pipeline run with (Open Data Hub's
# convention for models registered from Kubeflow Pipelines).
SOURCE_KIND = "kfp"
SOURCE_CLASS = "pipelinerun"

MetadataValue = str | int | float | bool


class ModelRegistryError(RunFailedError):
    """The Model Registry refused or failed a registration. The model is in production already;
    the registry does not record it (yet): retrying the task registers it."""


class ModelRegistryUnavailableError(ModelRegistryError):
    """The Model Registry cannot be reached (connection refused, unknown host, TLS failure)."""


class ModelRegistryAuthError(ModelRegistryError):
    """The Model Registry refused the credentials (401 or 403), or ``https://`` without a token."""


@dataclasses.dataclass(frozen=True)
class RegistryEndpoint:
    """Where the Model Registry's REST API is.

    Attributes:
        url: As given (``http://model-registry-service.kubeflow.svc.cluster.local:8080``); what
            messages name.
        server_address: The URL with its port spelled out, as the client takes it (a URL
            without a port gets the scheme's own, 80 or 443: the client would add 8080 to an
            ``http://`` one, and append the port after a path prefix).
        port: The port.
        secure: ``https``.
    """

    url: str
    server_address: str
    port: int
    secure: bool

    @classmethod
    def parse(cls, url: str) -> RegistryEndpoint:
        """The endpoint of ``url`` (``http://`` or ``https://``, a host, an optional port and
        path prefix).

        Raises:
            InvalidParameterError: Another scheme, no host, a bad port, credentials, a query.
        """
        problem = ""
        try:
            parsed = urllib.parse.urlsplit(url.strip())
            port = parsed.port
        except ValueError as err:
            raise InvalidParameterError(f"model_registry_url={url!r} is not a URL: {err}") from None
        if parsed.scheme not in DEFAULT_PORTS:
            problem = "needs http:// or https://"
        elif not parsed.hostname:
            problem = "names no host"
        elif parsed.username or parsed.password:
            problem = "carries credentials (the step authenticates with its service-account token)"
        elif parsed.query or parsed.fragment:
            problem = "has a query or fragment (give the API's base URL)"
        if problem:
            raise InvalidParameterError(
                f"model_registry_url={url!r} {problem}, e.g. "
                f"http://model-registry-service.kubeflow.svc.cluster.local:8080"
            )
        port = port or DEFAULT_PORTS[parsed.scheme]
        host = f"[{parsed.hostname}]" if ":" in str(parsed.hostname) else str(parsed.hostname)
        path = parsed.path.rstrip("/")
        return cls(
            url=url.strip(),
            server_address=f"{parsed.scheme}://{host}:{port}{path}",
            port=port,
            secure=parsed.scheme == "https",
        )


@dataclasses.dataclass(frozen=True)
class ModelRegistration:
    """What is registered: one version of a registered model and its model artifact.

    Attributes:
        name: The registered model (the InferenceService's name).
        version: The version's name: the model version (the run that trained it).
        uri: Where the model directory is, as KServe reads it (``s3://...``).
        model_format_name: The model's format (``onnx``, ``sklearn``...).
        model_format_version: Its version (an ONNX graph's opset); empty: none recorded.
        description: The version's description.
        metadata: The version's custom properties (the lineage as scalars).
        source_id, source_name, source_group: The pipeline run the version came from (its id,
            its name, its namespace); empty when unknown (the embedded platform), and then no
            provenance is recorded.
    """

    name: str
    version: str
    uri: str
    model_format_name: str
    model_format_version: str
    description: str
    metadata: Mapping[str, MetadataValue]
    source_id: str = ""
    source_name: str = ""
    source_group: str = ""


@dataclasses.dataclass(frozen=True)
class RegistrationResult:
    """What the registration step did (its ``registration`` output, as JSON).

    Attributes:
        registered: Whether the model version is in the registry now.
        url: The registry's URL (empty when off).
        reason: Why nothing was registered (when ``registered`` is false).
        created: Whether this call wrote anything (false: it was registered already).
        name, version, uri: The registered model, its version and the artifact's URI.
        registered_model_id, model_version_id, model_artifact_id: The registry's ids.
    """

    registered: bool
    url: str
    reason: str = ""
    created: bool = False
    name: str = ""
    version: str = ""
    uri: str = ""
    registered_model_id: str = ""
    model_version_id: str = ""
    model_artifact_id: str = ""

    @classmethod
    def skipped(cls, url: str, reason: str) -> RegistrationResult:
        return cls(registered=False, url=url, reason=reason)

    def to_dict(self) -> dict[str, Any]:
        if not self.registered:
            return {"registered": False, "reason": self.reason, "url": self.url}
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "reason"}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def skip_reason(decision: str) -> str:
    """Why a rollout's ``decision`` registers nothing; empty when it registers.

    Raises:
        InvalidParameterError: ``decision`` is not one the deploy step answers.
    """
    if decision not in DECISIONS:
        raise InvalidParameterError(f"decision={decision!r} is not one of {', '.join(DECISIONS)}")
    if decision in REGISTERED_DECISIONS:
        return ""
    registering = " and ".join(REGISTERED_DECISIONS)
    return f"decision={decision}: the model did not go into production (only {registering} register)"


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """The (field number, value) pairs of a serialized protobuf message: varints as ints,
    length-delimited fields as bytes, fixed-width ones skipped."""
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 0:
            value, pos = _varint(data, pos)
            yield number, value
        elif wire_type == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ValueError("truncated field")
            yield number, data[pos : pos + length]
            pos += length
        elif wire_type in (1, 5):
            pos += 8 if wire_type == 1 else 4
        else:
            raise ValueError(f"wire type {wire_type}")


# onnx.proto: ModelProto.opset_import = 8 (OperatorSetIdProto: domain = 1, version = 2).
_OPSET_IMPORT, _OPSET_DOMAIN, _OPSET_VERSION = 8, 1, 2


def format_of(model_dir: str, model_format: str, format_version: str = "") -> tuple[str, str]:
    """The format and version to register a model directory with: ``format_version`` as given,
    or for ``onnx`` the opset of the directory's one ``.onnx`` graph.

    Raises:
        InvalidParameterError: No format, or an ONNX directory without exactly one graph at its
            top, or one that is not an ONNX model.
    """
    if not model_format:
        raise InvalidParameterError("the model's format is unknown: give register_model its model_format")
    if format_version or model_format != ONNX:
        return model_format, format_version
    graphs = contracts.model_files(sorted(os.listdir(model_dir)), contracts.ONNX)
    if len(graphs) != 1:
        raise InvalidParameterError(
            f"an onnx model directory holds exactly one .onnx graph at its top; "
            f"{model_dir} holds {graphs or 'none'}"
        )
    return model_format, str(onnx_opset(os.path.join(model_dir, graphs[0])))


def onnx_opset(path: str) -> int:
    """The opset of the default ONNX domain that the model at ``path`` imports.

    Read from the protobuf wire format directly: the ``onnx`` package is the trainers' (the
    ``torch`` extra), not this step's image's.

    Raises:
        InvalidParameterError: No such file, not an ONNX model, or no default-domain opset.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise InvalidParameterError(f"cannot read the ONNX model {path}: {err}") from None
    try:
        for number, value in _fields(data):
            if number != _OPSET_IMPORT or not isinstance(value, bytes):
                continue
            fields = dict(_fields(value))
            domain = fields.get(_OPSET_DOMAIN, b"")
            version = fields.get(_OPSET_VERSION)
            if isinstance(domain, bytes) and domain.decode() in ("", "ai.onnx") and isinstance(version, int):
                return version
    except (ValueError, UnicodeDecodeError) as err:
        raise InvalidParameterError(f"{path} is not an ONNX model: {err}") from None
    raise InvalidParameterError(f"{path} imports no opset of the default ONNX domain: not an ONNX model")


def _scalar(value: Any) -> MetadataValue | None:
    """``value`` as a custom property: str, int, float and bool as they are (a non-finite float
    as text: the registry's JSON has no NaN); None left out; anything else as compact JSON."""
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def version_metadata(lineage: Lineage) -> dict[str, MetadataValue]:
    """The lineage as a version's custom properties: every parameter by its pipeline name, then
    the record's own fields over them (the data read wins over what was asked for):
    pipeline_version, kfstack_version, run_id, trained_at, the dataset's lineage by key (its
    ``window`` as window_start and window_end; e.g. input_uri, content_hash, rows_read; those it
    lacks left out) and each declared metric."""
    data = dict(lineage.data)
    window = data.pop("window", None) or {}
    recorded = {"window_start": window.get("start"), "window_end": window.get("end"), **data}
    values: dict[str, Any] = {
        **dict(lineage.parameters),
        "pipeline_version": lineage.pipeline_version,
        "kfstack_version": lineage.kfstack_version,
        "run_id": lineage.run_id,
        "trained_at": lineage.created,
        **{name: value for name, value in recorded.items() if value not in (None, "")},
        **dict(lineage.metrics),
    }
    scalars = {name: _scalar(value) for name, value in sorted(values.items())}
    return {name: value for name, value in scalars.items() if value is not None}


def version_description(lineage: Lineage) -> str:
    window = lineage.data.get("window") or {}
    if window:
        start = window.get("start") or "the start of the data"
        end = window.get("end") or "the end of the data"
        data = f"the data from {start} to {end}"
    else:  # a dataset whose data step recorded no window: where it was
        data = str(lineage.data.get("input_uri") or "its input dataset")
    return (
        f"Trained by pipeline version {lineage.pipeline_version} (kfstack {lineage.kfstack_version}), "
        f"run {lineage.run_id}, on {data}."
    )


def registration_for(
    lineage: Lineage,
    name: str,
    uri: str,
    model_format: str,
    format_version: str,
    source_group: str = "",
    with_source: bool = True,
) -> ModelRegistration:
    """What to register for the model of ``lineage`` served as ``name`` from ``uri``.

    Args:
        model_format, format_version: The model's format and its version (:func:`format_of`).
        with_source: Record the pipeline run as the version's provenance (a cluster run; an
            embedded run's id names no run a registry UI could link to).
    """
    return ModelRegistration(
        name=name,
        version=lineage.model_version,
        uri=uri,
        model_format_name=model_format,
        model_format_version=format_version,
        description=version_description(lineage),
        metadata=version_metadata(lineage),
        source_id=lineage.run_id if with_source else "",
        source_name=lineage.model_version if with_source else "",
        source_group=source_group if with_source else "",
    )


def read_token(path: str = SERVICE_ACCOUNT_TOKEN_FILE) -> str | None:
    """The bearer token in ``path`` (the pod's service-account token); None without one.

    Every pod's own token (the projected service-account token) by default, not the client's
    default order, which prefers ``$KF_PIPELINES_SA_TOKEN_PATH``: in a multi-user Kubeflow that
    is a token for the KFP API's audience, which a registry's TokenReview (kube-rbac-proxy)
    refuses.
    """
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _client_module() -> Any:
    try:
        import model_registry
    except ImportError as err:
        raise PlatformNotAvailableError(
            f"registering in a Model Registry needs the model-registry client: {INSTALL_HINT} ({err})"
        ) from None
    return model_registry


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    """The client's async runner: each call in an event loop of its own. (Without one the client
    patches asyncio process-wide with nest_asyncio2.) Its calls open and close their own HTTP
    session, so nothing outlives a loop."""
    return asyncio.run(coroutine)


@contextlib.contextmanager
def translated_errors(url: str) -> Iterator[None]:
    """The client's exceptions as :class:`ModelRegistryError` naming ``url``."""
    import aiohttp
    from model_registry.exceptions import StoreError
    from mr_openapi import exceptions as api

    try:
        yield
    except ModelRegistryError:
        raise
    except api.ApiException as err:
        detail = getattr(err.data, "message", None) or (err.body or "").strip()[:300]
        answer = f"{err.status} {err.reason or ''}".strip() + (f": {detail}" if detail else "")
        if err.status in (401, 403):
            raise ModelRegistryAuthError(
                f"the Model Registry at {url} refused the credentials ({answer}); the step sends the "
                f"pod's service-account token ({SERVICE_ACCOUNT_TOKEN_FILE}): give its service account "
                f"access to the registry"
            ) from err
        raise ModelRegistryError(f"the Model Registry at {url} answered {answer}") from err
    except (aiohttp.ClientError, OSError) as err:  # OSError: TimeoutError too
        raise ModelRegistryUnavailableError(
            f"cannot reach the Model Registry at {url}: {type(err).__name__}: {err}"
        ) from err
    except StoreError as err:
        raise ModelRegistryError(f"the Model Registry at {url}: {err}") from err
    except ValueError as err:  # pydantic's ValidationError too: an answer that is not the API's
        raise ModelRegistryError(
            f"the Model Registry at {url} answered something that is not its REST API (v1): {err}"
        ) from err


def connect(endpoint: RegistryEndpoint, author: str, token: str | None) -> Any:
    """The client (``model_registry.ModelRegistry``), connected: its constructor lists one
    registered model, so an unreachable server or refused credentials fail here.

    Raises:
        PlatformNotAvailableError: The client is not installed.
        ModelRegistryAuthError: ``https://`` without a token, or the credentials refused.
        ModelRegistryUnavailableError: The server cannot be reached.
    """
    client_module = _client_module()
    if endpoint.secure and not token:
        raise ModelRegistryAuthError(
            f"the Model Registry at {endpoint.url} is https:// and needs a bearer token; there is none "
            f"at {SERVICE_ACCOUNT_TOKEN_FILE} (is the pod's service-account token mounted?)"
        )
    with translated_errors(endpoint.url), warnings.catch_warnings():
        # Plain http:// without a token (a registry that checks none; the embedded platform).
        warnings.filterwarnings("ignore", "User access token is missing")
        return client_module.ModelRegistry(
            endpoint.server_address,
            endpoint.port,
            author=author,
            is_secure=endpoint.secure,
            user_token=token,
            async_runner=_run,
        )


def register(
    endpoint: RegistryEndpoint, registration: ModelRegistration, author: str, token: str | None
) -> RegistrationResult:
    """Registers ``registration`` unless it is already (see the module docstring).

    Raises:
        PlatformNotAvailableError: The client is not installed.
        ModelRegistryError: The registry refused or failed (its subclasses: unreachable, refused
            credentials); the version is registered with another URI.
    """
    client = connect(endpoint, author, token)
    r = registration
    artifact_fields: dict[str, Any] = {
        "model_format_name": r.model_format_name,
        "model_format_version": r.model_format_version,
    }
    if r.source_id:
        artifact_fields.update(
            model_source_kind=SOURCE_KIND,
            model_source_class=SOURCE_CLASS,
            model_source_id=r.source_id,
            model_source_name=r.source_name or None,
            model_source_group=r.source_group or None,
        )
    created = True
    with translated_errors(endpoint.url):
        found = client.get_model_version(r.name, r.version) if client.get_registered_model(r.name) else None
        if found is None:
            client.register_model(
                r.name,
                r.uri,
                version=r.version,
                author=author,
                owner=author,
                version_description=r.description,
                metadata=dict(r.metadata),
                **artifact_fields,
            )
        else:
            artifact = client.get_model_artifact(r.name, r.version)
            if artifact is None:
                # An earlier attempt stopped between the version and its artifact: complete it
                # (the client's own step of register_model; its public API has no other way).
                client.async_runner(client._register_model_artifact(found, r.name, r.uri, **artifact_fields))
            elif artifact.uri != r.uri:
                raise ModelRegistryError(
                    f"the Model Registry at {endpoint.url} has version {r.version} of {r.name} already, "
                    f"with the model at {artifact.uri}, not {r.uri}: a version name is one model"
                )
            else:
                created = False
        model = client.get_registered_model(r.name)
        version = client.get_model_version(r.name, r.version)
        artifact = client.get_model_artifact(r.name, r.version)
    return RegistrationResult(
        registered=True,
        url=endpoint.url,
        created=created,
        name=r.name,
        version=r.version,
        uri=artifact.uri,
        registered_model_id=str(model.id),
        model_version_id=str(version.id),
        model_artifact_id=str(artifact.id),
    )
