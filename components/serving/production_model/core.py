"""The production model, copied into a run's artifact (both platforms: :mod:`kfstack.serving.production`)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from kfstack import platforms
from kfstack.errors import InvalidParameterError
from kfstack.kubernetes.launcher import Cluster
from kfstack.serving.production import (
    RECORD_FILE,
    FoundModel,
    ProductionModel,
    copy_model,
    kserve_production_model,
    local_production_model,
)
from kfstack.serving.registry import REGISTRY_DIR_ENV


def find_production_model(
    platform: str, serving_name: str, cluster: Cluster | None = None, launch_namespace: str = ""
) -> ProductionModel | None:
    """The model in production on ``platform``; None when there is none. On Kubernetes the
    InferenceService is read in ``launch_namespace`` (empty: this pod's own) unless ``cluster``
    is given.

    Raises:
        InvalidParameterError: A local run outside ``kfstack run --local`` (no registry).
        PlatformNotAvailableError: ``kubernetes`` without a Kubernetes API.
    """
    platforms.require_available(platform, stage="production-model")
    if platform == platforms.LOCAL:
        registry_dir = os.environ.get(REGISTRY_DIR_ENV, "")
        if not registry_dir:
            raise InvalidParameterError(
                f"production-model on the embedded platform needs {REGISTRY_DIR_ENV} (set by "
                f"`kfstack run --local`)"
            )
        return local_production_model(registry_dir, serving_name)
    return kserve_production_model(
        cluster or Cluster.from_environment(stage="production-model", launch_namespace=launch_namespace),
        serving_name,
    )


def fetch_production_model(
    platform: str,
    serving_name: str,
    target_dir: str,
    comparable_files: Sequence[str] = (),
    cluster: Cluster | None = None,
    launch_namespace: str = "",
) -> FoundModel:
    """Copies the production model's files into ``target_dir`` and records what was found in
    ``champion.json`` there: comparable when it holds every one of ``comparable_files``."""
    production = find_production_model(platform, serving_name, cluster, launch_namespace)
    os.makedirs(target_dir, exist_ok=True)
    if production is None:
        found = FoundModel(found=False)
    else:
        names = copy_model(production, target_dir)
        comparable = all(name in names for name in comparable_files)
        found = FoundModel(True, production.version, production.model_uri, comparable)
    with open(os.path.join(target_dir, RECORD_FILE), "w", encoding="utf-8") as f:
        json.dump(found.metadata(), f, indent=2)
    print(f"production model: {found.version or 'none'}" + (f" from {found.source}" if found.found else ""))
    if found.found and not found.comparable:
        print(f"  not comparable: it lacks one of {', '.join(comparable_files)}")
    return found
