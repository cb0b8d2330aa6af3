"""KFP component: the model in production (the champion a retraining run compares with)."""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Model, Output

from kfstack.images import COMPONENT_IMAGE


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def production_model(
    platform: str,
    serving_name: str,
    model: Output[Model],
) -> NamedTuple("Production", [("found", bool), ("version", str), ("profile_uri", str)]):
    """Copies the model now in production into this step's ``model`` artifact.

    Never cached: production changes between runs.

    Args:
        platform: ``kubernetes`` reads the InferenceService ``serving_name`` (its production
            version and ``storageUri``); ``local`` reads the local registry's production record.
        serving_name: The InferenceService (and model) name.
        model: The production model's directory (ONNX model, feature spec, lookups, profile of
            its training data) plus ``champion.json``; only ``champion.json`` (``found``
            false) when nothing is in production. Metadata: found, version, source.

    Returns:
        Whether a model is in production, its version (empty when none), and where its
        training data's profile is (empty when none) for the feature job to bin the new window
        with.
    """
    from kfstack.components.serving.production_model.core import fetch_production_model
    from kfstack.platforms import artifact_location

    found = fetch_production_model(platform, serving_name, model.path)
    model.metadata.update(found.metadata())
    return (found.found, found.version, found.profile_uri(artifact_location(platform, model)))
