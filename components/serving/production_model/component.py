"""KFP component: the model in production (the champion a retraining run compares with)."""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Model, Output

from kfstack.images import COMPONENT_IMAGE


# A list as a default is a KFP parameter default, compiled into the spec; the body never
# mutates it (B006).
@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def production_model(
    platform: str,
    serving_name: str,
    model: Output[Model],
    comparable_files: list = [],  # noqa: B006
    # Settings from the parameter catalog, written by python -m kfstack.pipelines.signatures.
    launch_namespace: str = "",
    # End of the catalog's settings.
    settings_overrides: dict = {},  # noqa: B006
    # Outputs as KFP reads them: inline, for the task runs this function's source alone (no
    # module around it), which mypy cannot type -- hence the ignore.
) -> NamedTuple("Production", [("found", bool), ("version", str), ("profile_uri", str)]):  # type: ignore[valid-type]
    """Copies the model now in production into this step's ``model`` artifact.

    Never cached: production changes between runs.

    Args:
        platform: ``kubernetes`` reads the InferenceService ``serving_name`` (its production
            version and ``storageUri``); ``local`` reads the local registry's production record.
        serving_name: The InferenceService (and model) name.
        model: The production model's directory (its files, and the profile of its training
            data where it carries one) plus ``champion.json``; only ``champion.json``
            (``found`` false) when nothing is in production. Metadata: found, version, source,
            comparable.
        comparable_files: The files a production model must hold for this run to compare with
            it (a drift check needs its ``profile.json``, a gate what its server loads); one
            without them is recorded as found but not comparable. Empty: any model is.
        launch_namespace: Kubernetes: the namespace the launchers create their jobs and the InferenceService
            in (and read back, clean up and roll back there); empty: the task pod's own. The run's service
            account needs the launcher Role there (manifests/README.md).
        settings_overrides: The run's overrides of settings compiled into its version (setting
            -> value, ``kfstack describe``); the step applies those of its own arguments.

    Returns:
        Whether a model is in production, its version (empty when none), and where its
        training data's profile is (empty when none) for the feature job to bin the new window
        with.
    """
    from kfstack.settings import with_overrides

    arguments = with_overrides(locals())
    from kfstack.components.serving.production_model.core import fetch_production_model
    from kfstack.platforms import artifact_location

    found = fetch_production_model(
        platform, arguments["serving_name"], model.path, comparable_files, launch_namespace=launch_namespace
    )
    model.metadata.update(found.metadata())
    return (found.found, found.version, found.profile_uri(artifact_location(platform, model)))
