"""The Kubernetes objects a pipeline run would create, without a cluster (``kfstack render``).

The objects come from the same functions the launchers call (each component's
``spark_application`` / ``pytorch_job``), with the pipeline's defaults overridden by the given
parameters, so what is reviewed (or committed for GitOps) is what a run creates. The first task
of a ``kubernetes`` run renders them too, so that a bad parameter fails before anything is
submitted.

Artifact URIs follow the layout KFP gives a run's outputs under its pipeline root,
``<root>/<pipeline>/<run id>/<task>/<output>``; names and labels derive from the run id.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import yaml

from kfstack.errors import InvalidParameterError
from kfstack.uris import join


def _flights_training(params: dict[str, Any], run_id: str, pipeline_root: str) -> list[dict]:
    from kfstack.components.data.flights_features.launcher import spark_application
    from kfstack.components.training.common import CHECKPOINT_DIR
    from kfstack.components.training.train_pytorch.launcher import elastic_settings, pytorch_job
    from kfstack.components.training.train_tensorflow.launcher import tf_job
    from kfstack.kubernetes.naming import RunContext
    from kfstack.kubernetes.pods import SecretRefs
    from kfstack.kubernetes.spark_application import SparkResources
    from kfstack.spark_jobs.flights_features.config import FeatureJobConfig

    run_root = join(pipeline_root, "flights-training", run_id)
    secrets = SecretRefs(object_store=params["object_store_secret"], image_pull=params["image_pull_secret"])
    features_uri = join(run_root, "flights-features", "features")
    spark = spark_application(
        context=RunContext(run_id, "flights-features"),
        config=FeatureJobConfig(
            input_uri=params["data_uri"] or None, output_uri=features_uri,
            quarantine_uri=join(run_root, "flights-features", "quarantine"),
            num_shards=params["num_shards"], max_quarantine_fraction=params["max_quarantine_fraction"],
            sample_fraction=params["sample_fraction"], seed=params["seed"],
        ),
        resources=SparkResources(
            executor_instances=params["spark_executors"], executor_cores=params["spark_executor_cores"],
            executor_memory=params["spark_executor_memory"], driver_memory=params["spark_driver_memory"],
        ),
        secrets=secrets,
        service_account=params["spark_service_account"],
    )
    task = f"train-{params['framework']}"
    common = dict(
        context=RunContext(run_id, task), gpu_pool=params["gpu_pool"], secrets=secrets,
        active_deadline_seconds=params["training_timeout_seconds"], features_uri=features_uri,
        model_uri=join(run_root, task, "model"),
        checkpoint_uri=join(run_root, task, "training_logs", CHECKPOINT_DIR),
        epochs=params["epochs"], workers=params["workers"], batch_size=params["batch_size"],
        learning_rate=params["learning_rate"], max_restarts=params["max_restarts"], seed=params["seed"],
    )
    if params["framework"] == "tensorflow":
        training = tf_job(topology=params["tf_topology"], parameter_servers=params["tf_parameter_servers"], **common)
    elif params["framework"] == "pytorch":
        elastic = elastic_settings(params["elastic_min_workers"], params["elastic_max_workers"],
                                   params["max_restarts"])
        training = pytorch_job(elastic=elastic, **common)
    else:
        raise InvalidParameterError(f"framework={params['framework']!r} is not one of pytorch, tensorflow")
    return [spark, training]


RENDERERS: dict[str, Callable[[dict[str, Any], str, str], list[dict]]] = {
    "flights-training": _flights_training,
}


def pipeline_defaults(pipeline_func: Any) -> dict[str, Any]:
    """Every parameter of a ``@dsl.pipeline`` function with its default value."""
    return {name: spec.default for name, spec in pipeline_func.component_spec.inputs.items()}


def render_objects(name: str, params: dict[str, Any], *, run_id: str, pipeline_root: str,
                   defaults: dict[str, Any] | None = None) -> list[dict]:
    """The objects a ``kubernetes`` run of pipeline ``name`` would create.

    Args:
        name: A registered pipeline (``kfstack list``).
        params: Pipeline parameters; missing ones come from ``defaults``.
        run_id: Stands in for the KFP run id (names and labels).
        pipeline_root: The pipeline root the run would write under (e.g. ``s3://bucket/runs``).
        defaults: Values of the parameters not in ``params``; default: the pipeline function's
            own defaults (loading it needs the full kfp SDK, which a task's runtime lacks).

    Raises:
        InvalidParameterError: A parameter is invalid (nothing is rendered), or the pipeline
            launches nothing on Kubernetes.
    """
    if name not in RENDERERS:
        raise InvalidParameterError(f"pipeline {name!r} creates no Kubernetes objects kfstack can render")
    if defaults is None:
        from kfstack.pipelines import load_pipeline

        defaults = pipeline_defaults(load_pipeline(name))
    full = {**defaults, **params}
    return RENDERERS[name](full, run_id, pipeline_root)


def write_objects(objects: list[dict], out_dir: str) -> list[str]:
    """Writes one ``<kind>-<name>.yaml`` per object into ``out_dir``; returns the paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for obj in objects:
        path = os.path.join(out_dir, f"{obj['kind'].lower()}-{obj['metadata']['name']}.yaml")
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(obj, f, sort_keys=False)
        paths.append(path)
    return paths
