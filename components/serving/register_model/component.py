"""KFP component: the model that went into production, registered in Kubeflow Model Registry."""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Input, Model

from kfstack.images import COMPONENT_IMAGE


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def register_model(
    platform: str,
    model: Input[Model],
    decision: str,
    serving_name: str,
    model_registry_url: str,
    model_registry_author: str,
    model_format: str = "",
    model_format_version: str = "",
    settings_overrides: dict = {},  # noqa: B006
    # Outputs as KFP reads them: inline, for the task runs this function's source alone (no
    # module around it), which mypy cannot type -- hence the ignore.
) -> NamedTuple("Registration", [("registration", str)]):  # type: ignore[valid-type]
    """Registers the trained model as a version of ``serving_name`` in a Model Registry, when
    one is configured and the deploy step put the model into production.

    Args:
        platform: ``kubernetes`` registers the model artifact's URI (``s3://...``, what KServe
            serves) and the pipeline run as its source; ``local`` the model directory as a
            ``file://`` URI.
        model: The trained model directory (its ``lineage.json`` and the model).
        decision: The deploy step's decision; only ``first`` and ``promote`` register.
        serving_name: The registered model's name (the InferenceService's).
        model_registry_url: The Model Registry's REST base URL, ``http://`` or ``https://``
            (``http://model-registry-service.kubeflow.svc.cluster.local:8080``); empty: off
            (nothing is imported or contacted).
        model_registry_author: Author of the version and owner of a new registered model;
            empty: ``kfstack``.
        model_format: The registered format (KServe's name: ``onnx``, ``sklearn``,
            ``xgboost``...); empty: the format the training step recorded on the model.
        model_format_version: The format's version; empty: for ``onnx`` the graph's opset, read
            from its one ``.onnx`` file, otherwise none.
        settings_overrides: The run's overrides of settings compiled into its version (setting
            -> value, ``kfstack describe``); the step applies those of its own arguments.

    Returns:
        ``registration``: JSON, ``{"registered": false, "reason", "url"}`` or
        ``{"registered": true, "created", "name", "version", "uri", "registered_model_id",
        "model_version_id", "model_artifact_id", "url"}``.
    """
    from kfstack.settings import with_overrides

    arguments = with_overrides(locals())
    from kfstack.components.serving.register_model.core import register_production_model
    from kfstack.platforms import artifact_location

    result = register_production_model(
        platform,
        model.path,
        artifact_location(platform, model),
        decision,
        arguments["serving_name"],
        arguments["model_registry_url"],
        arguments["model_registry_author"],
        model_format=model_format or (model.metadata or {}).get("model_format", ""),
        model_format_version=model_format_version,
    )
    return (result.to_json(),)
