"""The model in production, found on either platform, for a run that must compare with it.

A retraining run checks its new data against the data the production model was trained on (the
model directory carries that data's ``profile.json``) and scores the production model beside the
one it trains. It finds the model where a rollout left it:

- embedded platform: the local registry's production record (:mod:`kfstack.serving.registry`);
- Kubernetes: the InferenceService's production version and ``storageUri``
  (:func:`kfstack.kubernetes.inference_service.production_model`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import fsspec

from kfstack.errors import InvalidParameterError
from kfstack.kubernetes import inference_service as isvc
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.resources import INFERENCE_SERVICE
from kfstack.monitoring.profiling import PROFILE_FILE
from kfstack.serving.registry import LocalRegistry
from kfstack.uris import fsspec_uri, join

# The storage schemes this process can read a model directory from (fsspec's object stores and
# local files); KServe's storage initializer knows more (pvc://, hf://, https://...).
_READABLE_SCHEMES = ("s3", "gs", "gcs", "az", "abfs", "file", "memory")


@dataclasses.dataclass(frozen=True)
class ProductionModel:
    """The model in production: its version and its directory (a path or URI)."""

    version: str
    model_uri: str


def local_production_model(registry_dir: str, name: str) -> ProductionModel | None:
    """The local registry's production record of ``name``; None before the first rollout."""
    record = LocalRegistry(registry_dir, name).production()
    return None if record is None else ProductionModel(record.version, record.model_dir)


def kserve_production_model(cluster: Cluster, name: str) -> ProductionModel | None:
    """The production model of InferenceService ``name``; None when it does not exist, the
    cluster serves no KServe, or nothing is in production yet.

    Raises:
        DeploymentFailedError: A Serverless canary is in progress (see
            :func:`~kfstack.kubernetes.inference_service.production_model`).
    """
    if not cluster.serves(INFERENCE_SERVICE):
        return None
    live = cluster.launcher(INFERENCE_SERVICE).get(name)
    found = None if live is None else isvc.production_model(live)
    return None if found is None else ProductionModel(*found)


def copy_model(model: ProductionModel, target_dir: str) -> list[str]:
    """Copies the model directory's files (not its subdirectories: a model directory has none)
    into ``target_dir`` (a local path); returns their names.

    Raises:
        InvalidParameterError: The directory cannot be read from here (a ``pvc://`` or
            ``https://`` URI, which only KServe's storage initializer reads) or holds no files.
    """
    uri = fsspec_uri(model.model_uri)
    scheme = uri.split("://", 1)[0] if "://" in uri else "file"
    if scheme not in _READABLE_SCHEMES:
        raise InvalidParameterError(
            f"production model {model.version} is at {model.model_uri}, which this task cannot read "
            f"({scheme}:// is read by KServe's storage initializer only); store models on an object store"
        )
    fs, root = fsspec.core.url_to_fs(uri)
    names = sorted(os.path.basename(p) for p in fs.ls(root, detail=False) if fs.isfile(p))
    if not names:
        raise InvalidParameterError(f"production model {model.version}: {model.model_uri} holds no files")
    os.makedirs(target_dir, exist_ok=True)
    for name in names:
        fs.get(f"{root.rstrip('/')}/{name}", os.path.join(target_dir, name))
    return names


# Written into the artifact whatever was found: a reader (and KFP's upload) always has a file.
RECORD_FILE = "champion.json"


@dataclasses.dataclass(frozen=True)
class FoundModel:
    """What a production-model step found (its artifact's ``champion.json``)."""

    found: bool
    version: str = ""
    source: str = ""
    # Found, and a model directory of this project's kind (a serving model and its training
    # profile): it can be checked against and scored. A service serving another kind of model is
    # in production but not comparable.
    comparable: bool = False

    def metadata(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def profile_uri(self, artifact_uri: str) -> str:
        """The production model's training profile inside the artifact at ``artifact_uri``."""
        return join(artifact_uri, PROFILE_FILE) if self.comparable else ""


def read_found(model_dir: str) -> FoundModel:
    """What a production-model artifact holds (its ``champion.json``)."""
    with open(os.path.join(model_dir, RECORD_FILE), encoding="utf-8") as f:
        return FoundModel(**json.load(f))
