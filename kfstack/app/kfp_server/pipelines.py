"""Pipelines and their versions on a KFP API server: find, resolve, upload, name.

Names: a version's display name is the pipeline version (``0.1.0+abc1234``, ``+`` allowed); its
``name``, which a Kubernetes-native KFP store turns into an object name, is
:func:`~kfstack.version.label_safe`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import kfp_server_api

from kfstack import pipeline_spec
from kfstack.app.kfp_server.connection import PAGE_SIZE, api_host, name_filter, pages, ui_base, user_namespace
from kfstack.errors import UsageError
from kfstack.version import label_safe


@dataclasses.dataclass(frozen=True)
class PipelineVersionRef:
    """A pipeline version on the server.

    Attributes:
        pipeline: The pipeline's name (its display name on the server).
        pipeline_id: Its server id.
        version: The version's display name.
        version_id: Its server id.
    """

    pipeline: str
    pipeline_id: str
    version: str
    version_id: str


@dataclasses.dataclass(frozen=True)
class Upload:
    """What :func:`upload` did.

    Attributes:
        ref: The pipeline version, uploaded now or before.
        new_pipeline: The pipeline did not exist; it was created with ``ref`` as its first version.
        new_version: ``ref`` was uploaded now (False: it already was, nothing was uploaded).
    """

    ref: PipelineVersionRef
    new_pipeline: bool
    new_version: bool


def find_pipeline(client: Any, name: str) -> str | None:
    """The id of the pipeline named ``name`` (in the client's namespace), or ``None``.

    Raises:
        UsageError: Several pipelines carry the name.
    """
    response = client.list_pipelines(filter=name_filter(name), namespace=user_namespace(client), page_size=10)
    ids = [p.pipeline_id for p in response.pipelines or [] if p.display_name == name]
    if len(ids) > 1:
        raise UsageError(f"{len(ids)} pipelines on the server are named {name!r} (ids {', '.join(ids)})")
    return ids[0] if ids else None


def pipeline_versions(client: Any, pipeline_id: str) -> list[Any]:
    """Every version of the pipeline, newest first."""
    return list(
        pages(
            lambda token: client.list_pipeline_versions(
                pipeline_id, page_token=token, page_size=PAGE_SIZE, sort_by="created_at desc"
            ),
            "pipeline_versions",
        )
    )


def _is_version(candidate: Any, version: str) -> bool:
    # Older servers (before KFP 2.5) keep one name per version; newer ones a name and a display
    # name. A version uploaded as 0.1.0+abc is 0.1.0-abc where names must be label-safe.
    return bool({version, label_safe(version)} & {candidate.display_name, candidate.name})


def find_version(client: Any, pipeline_id: str, version: str) -> Any | None:
    """The pipeline's version ``version`` (display name or label-safe name), or ``None``."""
    return next((v for v in pipeline_versions(client, pipeline_id) if _is_version(v, version)), None)


def upload(client: Any, name: str, package_path: str, version: str) -> Upload:
    """Uploads the compiled pipeline ``package_path`` as version ``version`` of pipeline ``name``.

    A pipeline that does not exist is created, with ``version`` as its first version. A version
    that exists already is not uploaded again (``new_version`` False).

    The first version: ``/apis/v2beta1/pipelines/upload`` (``kfp.Client.upload_pipeline``)
    creates the pipeline *and* a first version named after the pipeline, whatever the file's
    version (kubeflow/pipelines#5881, #13753); the usual workaround, uploading again and deleting
    that version, leaves a window with a wrongly named version and a failure mode that keeps it.
    ``CreatePipelineAndVersion`` (``/apis/v2beta1/pipelines/create``) names both, but takes the
    version's package as a URL the server downloads, not a file from this machine. So: create the
    pipeline entity alone (``POST /apis/v2beta1/pipelines``, a ``V2beta1Pipeline`` without
    version: the server creates no version then), then upload the file as its version with our
    name. If the second step fails, the pipeline exists without a version and the next
    ``upload`` adopts it.

    Raises:
        KfpRequestError, KfpAuthError, KfpServerUnavailableError: Within
            :func:`~kfstack.app.kfp_server.connection.connect`.
    """
    namespace = user_namespace(client)
    pipeline_id = find_pipeline(client, name)
    new_pipeline = pipeline_id is None
    if pipeline_id is not None:
        existing = find_version(client, pipeline_id, version)
        if existing is not None:
            return Upload(_ref(name, existing), new_pipeline=False, new_version=False)
    else:
        try:
            created = client.pipelines.pipeline_service_create_pipeline(
                pipeline=kfp_server_api.V2beta1Pipeline(
                    name=name, display_name=name, description=_description(package_path), namespace=namespace
                )
            )
            pipeline_id = created.pipeline_id
        except kfp_server_api.ApiException as err:
            # Another upload created it between our lookup and now: adopt it.
            pipeline_id = find_pipeline(client, name) if err.status == 409 else None
            if pipeline_id is None:
                raise
    try:
        uploaded = client.pipeline_uploads.upload_pipeline_version(
            package_path,
            name=label_safe(version),
            display_name=version,
            pipelineid=pipeline_id,
            description=f"{name} {version}, uploaded by kfstack",
        )
    except kfp_server_api.ApiException as err:
        existing = find_version(client, pipeline_id, version) if err.status == 409 else None
        if existing is None:
            raise
        return Upload(_ref(name, existing), new_pipeline=new_pipeline, new_version=False)
    return Upload(_ref(name, uploaded), new_pipeline=new_pipeline, new_version=True)


def _ref(pipeline: str, version: Any) -> PipelineVersionRef:
    return PipelineVersionRef(
        pipeline=pipeline,
        pipeline_id=version.pipeline_id,
        version=version.display_name or version.name,
        version_id=version.pipeline_version_id,
    )


def _description(package_path: str) -> str | None:
    """The compiled pipeline's description (``pipelineInfo.description``), for the UI."""
    with open(package_path, encoding="utf-8") as f:
        spec: dict[str, Any] = next(iter(pipeline_spec.read_documents(f)), {})
    description = spec.get("pipelineInfo", {}).get("description")
    return str(description) if description else None


def require_pipeline(client: Any, name: str) -> str:
    """The id of the pipeline named ``name``.

    Raises:
        UsageError: The server has none of that name (in the client's namespace).
    """
    pipeline_id = find_pipeline(client, name)
    if pipeline_id is None:
        where = f" in namespace {user_namespace(client)}" if user_namespace(client) else ""
        raise UsageError(
            f"pipeline {name!r} is not on the KFP server at {api_host(client)}{where}; "
            f"upload it first: kfstack upload {name}"
        )
    return pipeline_id


def resolve_version(client: Any, pipeline: str, version: str | None = None) -> PipelineVersionRef:
    """Pipeline ``pipeline``'s version ``version`` on the server, or its latest when ``None``.

    Raises:
        UsageError: No such pipeline, no such version, or a pipeline without versions.
    """
    pipeline_id = require_pipeline(client, pipeline)
    versions = pipeline_versions(client, pipeline_id)
    if not versions:
        raise UsageError(f"pipeline {pipeline!r} has no version yet; upload one: kfstack upload {pipeline}")
    if version is None:
        return _ref(pipeline, versions[0])
    found = next((v for v in versions if _is_version(v, version)), None)
    if found is None:
        newest = ", ".join(v.display_name or v.name for v in versions[:5])
        raise UsageError(f"pipeline {pipeline!r} has no version {version!r}; its newest: {newest}")
    return _ref(pipeline, found)


def pipeline_url(client: Any, pipeline_id: str, version_id: str) -> str:
    return f"{ui_base(client)}/#/pipelines/details/{pipeline_id}/version/{version_id}"


def pipeline_name(client: Any, pipeline_id: str) -> str:
    """The display name of pipeline ``pipeline_id`` (its id when it cannot be read)."""
    try:
        return str(client.get_pipeline(pipeline_id).display_name or pipeline_id)
    except kfp_server_api.ApiException:
        return pipeline_id


def version_name(client: Any, pipeline_id: str, version_id: str) -> str:
    """The display name of a pipeline version (its id when it cannot be read: deleted)."""
    try:
        version = client.get_pipeline_version(pipeline_id, version_id)
    except kfp_server_api.ApiException:
        return version_id
    return str(version.display_name or version.name or version_id)
