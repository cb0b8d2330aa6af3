"""The production model, registered in Kubeflow Model Registry when one is configured
(:mod:`kfstack.serving.model_registry`)."""

from __future__ import annotations

import logging

from kfstack import platforms
from kfstack.errors import InvalidParameterError
from kfstack.kubernetes.naming import SERVICE_ACCOUNT_TOKEN_FILE, current_namespace
from kfstack.lineage import Lineage
from kfstack.serving import model_registry as mr
from kfstack.uris import storage_uri

logger = logging.getLogger(__name__)

STEP = "register-model"


def register_production_model(
    platform: str,
    model_dir: str,
    model_location: str,
    decision: str,
    serving_name: str,
    registry_url: str,
    author: str,
    model_format: str = "",
    model_format_version: str = "",
    token_path: str = SERVICE_ACCOUNT_TOKEN_FILE,
) -> mr.RegistrationResult:
    """Registers the model of ``model_dir`` as version ``lineage.model_version`` of
    ``serving_name`` when ``registry_url`` is set and the rollout's ``decision`` put it into
    production; otherwise says why not. With no ``registry_url`` nothing is read, imported or
    contacted.

    Args:
        platform: ``kubernetes`` or ``local``.
        model_dir: The model directory on this machine (``lineage.json`` and the model).
        model_location: Where the platform keeps it (:func:`kfstack.platforms.artifact_location`):
            the artifact's URI on Kubernetes, the same path locally.
        decision: The deploy step's decision.
        serving_name: The registered model's name (the InferenceService's).
        registry_url: The Model Registry's REST base URL; empty: off.
        author: The registration's author and the registered model's owner; empty: ``kfstack``.
        model_format, model_format_version: What the model is (:func:`~kfstack.serving.
            model_registry.format_of`: an ONNX graph's opset is read from it).
        token_path: The bearer token's file (the pod's service-account token).

    Raises:
        InvalidParameterError: A bad URL, platform or decision; a model directory without its
            lineage, without a format, or an ``onnx`` one without its graph.
        PlatformNotAvailableError: The model-registry client is not installed.
        ModelRegistryError: The registry cannot be reached, refused the credentials or the
            request, or has this version with another URI.
    """
    if not registry_url.strip():
        return mr.RegistrationResult.skipped("", "no model_registry_url: registration is off")
    platforms.require_available(platform, stage=STEP)
    endpoint = mr.RegistryEndpoint.parse(registry_url)
    reason = mr.skip_reason(decision)
    if reason:
        logger.info("not registering: %s", reason)
        return mr.RegistrationResult.skipped(endpoint.url, reason)
    if not serving_name:
        raise InvalidParameterError(f"{STEP}: serving_name is empty (the registered model's name)")
    lineage = Lineage.load(model_dir)
    on_cluster = platform == platforms.KUBERNETES
    registration = mr.registration_for(
        lineage,
        serving_name,
        storage_uri(model_location),
        *mr.format_of(model_dir, model_format, model_format_version),
        source_group=_namespace() if on_cluster else "",
        with_source=on_cluster,
    )
    result = mr.register(endpoint, registration, author or mr.DEFAULT_AUTHOR, mr.read_token(token_path))
    logger.info(
        "%s %s version %s in the Model Registry at %s (version id %s)",
        "registered" if result.created else "already registered:",
        result.name,
        result.version,
        result.url,
        result.model_version_id,
    )
    return result


def _namespace() -> str:
    """The registered version's source group: the pipeline run's namespace, the task pod's own,
    even where the run launched its jobs and serves its model in another (``launch_namespace``):
    it names where the run is, which is what a registry UI links to."""
    try:
        return current_namespace()
    except InvalidParameterError:
        return ""
