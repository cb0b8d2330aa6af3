"""An S3-compatible object store on loopback, for an embedded step's cluster-like locations.

On a cluster the training code is told ``s3://`` URIs: an object store, where ``open()`` and
``os.path`` fail, a key has no rename or append, and a "folder" is a prefix. Under
``KFSTACK_URI_LOCATIONS=1`` (:data:`kfstack.uris.URI_LOCATIONS_ENV`) the embedded training and
tuning steps tell the code the same kind of URI: for the step's duration an S3 server (moto's, in
a thread of the step's process, on 127.0.0.1 and a free port) holds its input and checkpoints,
and the replicas get its endpoint and credentials the way a cluster's pods get the object-store
Secret's (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...).

A location of this machine is held under the same path as a key (``/a/b`` is
``s3://kfstack-embedded/a/b``): the input folder is copied in before the code starts, and what the
code wrote under a writable location (its checkpoints) is copied back to that folder when the step
ends, so that the run directory holds what it holds without the switch.

The Spark step is not served from here: Spark reaches S3 only through the hadoop-aws jars, which
pyspark does not ship, so it is told ``file://`` URIs (:func:`kfstack.uris.embedded_location`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

from kfstack.uris import URI_LOCATIONS_ENV

BUCKET = "kfstack-embedded"
_REGION = "us-east-1"
# moto accepts any credentials; the code is handed these as a cluster's pods are handed the
# object-store Secret's.
_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "kfstack-embedded", "AWS_SECRET_ACCESS_KEY": "kfstack-embedded"}


class EmbeddedObjectStore:
    """A running S3 server and the step's locations in it."""

    def __init__(self, endpoint: str) -> None:
        import s3fs

        self.endpoint = endpoint
        self._fs = s3fs.S3FileSystem(
            key=_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            secret=_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            client_kwargs={"endpoint_url": endpoint, "region_name": _REGION},
            skip_instance_cache=True,
        )
        # Not mkdir(): s3fs then sends the region as a LocationConstraint, which S3 refuses for
        # us-east-1.
        self._fs.call_s3("create_bucket", Bucket=BUCKET)
        self._uploaded: set[str] = set()
        self._writable: set[str] = set()

    @property
    def env(self) -> dict[str, str]:
        """What the code's processes need to reach the store (botocore, s3fs and pyarrow all read
        ``AWS_ENDPOINT_URL``)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_DEFAULT_REGION": _REGION, **_CREDENTIALS}

    @staticmethod
    def uri(local: str) -> str:
        """The key a location of this machine is held under, as a URI."""
        return f"s3://{BUCKET}/{os.path.abspath(local).lstrip('/')}"

    def upload(self, local: str) -> str:
        """``local`` (a folder or a file) copied into the store, once; its URI."""
        uri = self.uri(local)
        if uri not in self._uploaded:
            if os.path.isdir(local):
                self._fs.put(local.rstrip("/") + "/", uri + "/", recursive=True)
            elif os.path.exists(local):
                self._fs.put_file(local, uri)
            self._uploaded.add(uri)
        return uri

    def writable(self, local: str) -> str:
        """The URI of a location the code writes to; what it holds comes back to ``local`` when
        the store stops."""
        uri = self.uri(local)
        self._writable.add(uri)
        return uri

    def copy_back(self) -> None:
        """Every writable location's objects to the folder it stands for."""
        for uri in sorted(self._writable):
            if not self._fs.exists(uri):
                continue
            local = "/" + uri.removeprefix(f"s3://{BUCKET}/")
            os.makedirs(local, exist_ok=True)
            self._fs.get(uri + "/", local + "/", recursive=True)


@contextlib.contextmanager
def for_step() -> Iterator[EmbeddedObjectStore | None]:
    """An object store for the step's duration under ``KFSTACK_URI_LOCATIONS=1``, else None.

    Raises:
        RuntimeError: The switch is on and moto's server or s3fs is not installed.
    """
    if os.environ.get(URI_LOCATIONS_ENV) != "1":
        yield None
        return
    try:
        from moto.server import ThreadedMotoServer
    except ImportError as err:
        raise RuntimeError(
            f"{URI_LOCATIONS_ENV}=1 serves the training code's locations from an S3-compatible "
            "server on loopback (moto), which is not installed here: install kfstack's local extra "
            "(kfstack[local], [local-torch] or [local-tf]), or unset the switch"
        ) from err
    # Its request log would fill the step's log with a line per object.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server: Any = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        store = EmbeddedObjectStore(f"http://{host}:{port}")
        try:
            yield store
        finally:
            store.copy_back()
    finally:
        server.stop()
