"""Artifact URIs as the code that reads and writes them needs them.

On a cluster a component hands its launched job the *remote* URI of an artifact
(``artifact.uri``), not the task pod's local path: the job's pods run elsewhere. KFP's default
MinIO store writes those as ``minio://bucket/key``, which no fsspec filesystem is registered
for; MinIO speaks S3, so they become ``s3://bucket/key`` (the endpoint then comes from
``AWS_ENDPOINT_URL`` in the object-store Secret).
"""

from __future__ import annotations

import os
import posixpath

from kfstack.settings import Placeholder

_ALIASES = {"minio://": "s3://"}
# Set to 1 for an embedded run whose steps tell a team's code its locations as URIs
# (``file:///...``), as a cluster tells it ``s3://...``: code that takes a location for a local
# path (``open()``, ``os.path``) then fails here as it would there. ``kfstack run --local
# --uri-locations`` sets it for the run's processes.
URI_LOCATIONS_ENV = "KFSTACK_URI_LOCATIONS"
# How Spark (Hadoop's filesystems) names the same object-store locations: ``s3://`` is the
# S3A connector's ``s3a://`` there.
_SPARK_ALIASES = {"minio://": "s3a://", "s3://": "s3a://"}


def fsspec_uri(uri: str) -> str:
    """``uri`` with a scheme fsspec can open (``minio://`` -> ``s3://``); others unchanged."""
    for alias, scheme in _ALIASES.items():
        if uri.startswith(alias):
            return scheme + uri[len(alias) :]
    return uri


def spark_uri(uri: str) -> str:
    """``uri`` as a Spark job opens it (``s3://`` and ``minio://`` -> ``s3a://``); a local path,
    another scheme or a :class:`~kfstack.settings.Placeholder` unchanged."""
    if isinstance(uri, Placeholder):
        return uri
    for alias, scheme in _SPARK_ALIASES.items():
        if uri.startswith(alias):
            return scheme + uri[len(alias) :]
    return uri


def embedded_location(location: str) -> str:
    """A location on this machine as the embedded platform tells a team's code: its path, or a
    ``file://`` URI under :data:`URI_LOCATIONS_ENV`; a URI, an empty location or a
    :class:`~kfstack.settings.Placeholder` unchanged."""
    if isinstance(location, Placeholder) or not location or "://" in location:
        return location
    if os.environ.get(URI_LOCATIONS_ENV) == "1":
        return "file://" + os.path.abspath(location)
    return location


def join(uri: str, *parts: str) -> str:
    """``uri`` / ``parts`` with exactly one ``/`` between them (works for local paths too)."""
    return posixpath.join(uri.rstrip("/"), *parts)


def storage_uri(location: str) -> str:
    """The URI KServe serves a model directory from (and a registry records): a remote artifact
    URI in a scheme KServe and fsspec read (``minio://`` -> ``s3://``); a local path (the
    embedded platform) as a ``file://`` URI; a :class:`~kfstack.settings.Placeholder` (an
    artifact only the run knows, ``kfstack render``) as it is."""
    if isinstance(location, Placeholder):
        return location
    if "://" not in location:
        return "file://" + os.path.abspath(location)
    return fsspec_uri(location)
