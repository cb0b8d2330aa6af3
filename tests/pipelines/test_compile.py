"""Spec tests: every pipeline compiles, without heavy imports, into the structure we intend."""

import json
import subprocess
import sys

import pytest
import yaml

from kfstack import images
from kfstack.app.cli.compile_ import compile_pipelines, compiled_path
from kfstack.app.cli.parameters import parse_params
from kfstack.errors import UsageError
from kfstack.kubernetes.naming import SIDECAR_INJECT_LABEL
from kfstack.pipeline_spec import compiled_setting
from kfstack.pipelines import load_pipeline, pipeline_names
from kfstack.pipelines.parameters import CATALOG, declared_parameters
from kfstack.version import __version__, label_safe


def compile_one(name: str, out) -> tuple[dict, dict]:
    """(pipeline spec, platform spec) of pipeline ``name``: kfp-kubernetes settings go to a
    second YAML document."""
    (path,) = compile_pipelines([name], str(out))
    with open(path) as f:
        pipeline_spec, platform_spec = yaml.safe_load_all(f)
    return pipeline_spec, platform_spec


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return compile_one("flights-training", tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def flights_spec(compiled):
    return compiled[0]


@pytest.fixture(scope="module")
def executor_configs(compiled):
    """Executor name -> its Kubernetes settings (node selector, tolerations, secrets...)."""
    return compiled[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]


def test_compile_writes_versioned_files_without_heavy_imports(tmp_path):
    # A fresh interpreter: compiling must not pull in the frameworks the tasks use.
    code = (
        "import sys, json; from kfstack.app.cli import main; from kfstack.version import pipeline_version; "
        f"rc = main(['compile', '--out', {str(tmp_path)!r}]); "
        "print(json.dumps([[m for m in ('torch', 'pyspark', 'tensorflow', 'onnxruntime') "
        "if m in sys.modules], pipeline_version()]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    heavy, version = json.loads(proc.stdout.strip().splitlines()[-1])
    assert heavy == []
    # The version that process stamped (the tree's state when it ran: -dirty if edited meanwhile).
    assert version.startswith(__version__)
    for name in pipeline_names():
        assert (tmp_path / f"{name}-{label_safe(version)}.yaml").is_file()
    assert compiled_path("dist/pipelines", "x", "0.1.0+abc") == "dist/pipelines/x-0.1.0-abc.yaml"


def test_flights_training_task_graph(flights_spec):
    root = flights_spec["root"]["dag"]["tasks"]
    # Everything runs inside the exit handler; cleanup runs after it, however it ended.
    assert set(root) == {"exit-handler-1", "cleanup-run"}
    assert root["cleanup-run"]["triggerPolicy"]["strategy"] == "ALL_UPSTREAM_TASKS_COMPLETED"
    assert root["cleanup-run"]["dependentTasks"] == ["exit-handler-1"]
    components = flights_spec["components"]
    tasks = components["comp-exit-handler-1"]["dag"]["tasks"]
    # One training step whatever the framework: later stages appear once in the graph.
    assert set(tasks) == {
        "validate-run",
        "spark-job",
        "hyperparameter-tuning",
        "distributed-training",
        "model-evaluation",
        "model-deployment",
        "register-model",
    }
    # Parameters are checked before the feature job starts.
    assert tasks["spark-job"]["dependentTasks"] == ["validate-run"]
    checked = tasks["validate-run"]["inputs"]["parameters"]
    assert checked["pipeline"]["runtimeValue"]["constant"] == "flights-training"
    # The check gets every pipeline parameter, the settings compiled in, so it renders what the
    # run would create; the JSON ones as inputs of their own (kfp.local puts dict values in as raw
    # text), and the run's settings overrides, which it checks and applies first.
    passed = checked["parameters"]["runtimeValue"]["constant"]
    json_inputs = {"tuning_search_space", "tuning_algorithm_settings"}
    assert set(passed) | json_inputs == set(declared_parameters(load_pipeline("flights-training")).names)
    for name in json_inputs:
        assert "constant" in checked[name]["runtimeValue"], name
    assert checked["settings_overrides"] == {"componentInputParameter": "pipelinechannel--settings_overrides"}
    # The flights trainers through the generic steps: the run's hyperparameters are the pipeline
    # parameters of the same name; training takes tuning's best, whether it tuned or not.
    tuning = tasks["hyperparameter-tuning"]["inputs"]["parameters"]
    assert tuning["hyperparameters"]["runtimeValue"]["constant"]["learning_rate"] == (
        "{{$.inputs.parameters['pipelinechannel--learning_rate']}}"
    )
    assert tuning["training_code"]["runtimeValue"]["constant"] == "kfstack_examples.flights.training.train"
    train = tasks["distributed-training"]["inputs"]
    assert train["parameters"]["hyperparameters"] == {
        "taskOutputParameter": {
            "outputParameterKey": "best_hyperparameters",
            "producerTask": "hyperparameter-tuning",
        }
    }
    assert train["artifacts"]["data"] == {
        "taskOutputArtifact": {"outputArtifactKey": "output", "producerTask": "spark-job"}
    }
    # A per-run parameter reaches the step as the run's value; a setting as the version's, with
    # the part of the run's overrides training reads beside it, which the check hands on.
    assert train["parameters"]["framework"] == {"componentInputParameter": "pipelinechannel--framework"}
    assert train["parameters"]["gpu_pool"] == {"runtimeValue": {"constant": "h100"}}
    assert train["parameters"]["settings_overrides"] == {
        "taskOutputParameter": {
            "outputParameterKey": "distributed_training_overrides",
            "producerTask": "validate-run",
        }
    }
    assert tasks["model-evaluation"]["inputs"]["artifacts"]["model"] == {
        "taskOutputArtifact": {"outputArtifactKey": "model", "producerTask": "distributed-training"}
    }
    # The evaluated model is deployed after its evaluation, never from cache, and its canary
    # replays the feature job's holdout; its part of the overrides comes from the check.
    deploy = tasks["model-deployment"]
    assert deploy["dependentTasks"] == [
        "distributed-training",
        "model-evaluation",
        "spark-job",
        "validate-run",
    ]
    assert deploy["cachingOptions"] == {}
    assert deploy["inputs"]["artifacts"] == {
        "model": {
            "taskOutputArtifact": {"outputArtifactKey": "model", "producerTask": "distributed-training"}
        },
        "holdout": {"taskOutputArtifact": {"outputArtifactKey": "output", "producerTask": "spark-job"}},
    }
    # The generic deployment, with the flights predictor as its custom predictor.
    constants = {
        name: value["runtimeValue"]["constant"]
        for name, value in deploy["inputs"]["parameters"].items()
        if "runtimeValue" in value
    }
    assert constants["model_format"] == "custom"
    assert constants["custom_predictor"] == "kfstack_examples.flights.predictor.server:FlightDelayModel"
    assert constants["holdout_split"] == "holdout_requests.parquet"
    assert constants["canary_max_quality_drop"] == CATALOG["canary_max_quality_drop"].default
    # Deterministic job names: the run id and task name reach the launching stages.
    for launching in ("spark-job", "hyperparameter-tuning", "distributed-training", "model-deployment"):
        parameters = tasks[launching]["inputs"]["parameters"]
        assert parameters["run_id"]["runtimeValue"]["constant"] == "{{$.pipeline_job_uuid}}"
        assert parameters["task_name"]["runtimeValue"]["constant"] == "{{$.pipeline_task_name}}"
        assert parameters["platform"] == {"runtimeValue": {"constant": "kubernetes"}}


def test_flights_training_parameters_are_typed_documented_and_defaulted(flights_spec):
    params = flights_spec["root"]["inputDefinitions"]["parameters"]
    # The run form: what a person sets per run, and the settings overrides.
    declared = declared_parameters(load_pipeline("flights-training"))
    assert set(params) == {p.name for p in declared if p.per_run} | {"settings_overrides"}
    assert params["settings_overrides"]["parameterType"] == "STRUCT"
    assert params["settings_overrides"]["defaultValue"] == {}
    assert params["workers"]["parameterType"] == "NUMBER_INTEGER"
    assert params["learning_rate"]["parameterType"] == "NUMBER_DOUBLE"
    assert params["data_uri"]["defaultValue"] == ""
    for name, spec in params.items():
        assert "defaultValue" in spec, name
        assert spec.get("description"), f"parameter {name} has no description for the UI"
    assert params["framework"]["defaultValue"] == "pytorch"
    outputs = flights_spec["components"]["comp-model-evaluation"]["outputDefinitions"]["artifacts"]
    assert outputs["classification"]["artifactType"]["schemaTitle"] == "system.ClassificationMetrics"
    assert outputs["evaluation_report"]["artifactType"]["schemaTitle"] == "system.Markdown"
    train_outputs = flights_spec["components"]["comp-distributed-training"]["outputDefinitions"]["artifacts"]
    assert train_outputs["model"]["artifactType"]["schemaTitle"] == "system.Model"


def test_task_pods_carry_the_cpu_pool_namespace_and_secret_refs(executor_configs):
    from kfstack.kubernetes import node_pools

    cpu = node_pools.get_profile(node_pools.CPU_POOL)
    assert set(executor_configs) == {
        "exec-validate-run",
        "exec-spark-job",
        "exec-hyperparameter-tuning",
        "exec-distributed-training",
        "exec-model-evaluation",
        "exec-model-deployment",
        "exec-register-model",
        "exec-cleanup-run",
    }
    for name, config in executor_configs.items():
        assert config["nodeSelector"]["nodeSelectorJson"]["runtimeValue"]["constant"] == cpu.node_selector, (
            name
        )
        # The pod's own namespace and service account (where the run is, and as whom).
        assert config["fieldPathAsEnv"] == [
            {"name": "KFSTACK_NAMESPACE", "fieldPath": "metadata.namespace"},
            {"name": "KFSTACK_SERVICE_ACCOUNT", "fieldPath": "spec.serviceAccountName"},
        ]
        secret, tracking = config["secretAsEnv"]
        # The version's Secrets, compiled in (the driver mounts them before any override is read).
        assert secret["secretNameParameter"] == {"runtimeValue": {"constant": "kfstack-object-store"}}, name
        assert secret["optional"] is True
        assert {k["secretKey"] for k in secret["keyToEnv"]} == {
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ENDPOINT_URL",
            "AWS_DEFAULT_REGION",
        }
        # The tracking server's credentials, for a task that makes its own MLflow run; each key
        # optional, as the Secret itself (KFP's MLflow plugin's, by default).
        assert tracking["secretNameParameter"] == {"runtimeValue": {"constant": "kfp-mlflow-credentials"}}, (
            name
        )
        assert tracking["optional"] is True
        assert {(k["secretKey"], k["envVar"]) for k in tracking["keyToEnv"]} == {
            (key, key)
            for key in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")
        }


def test_task_pods_request_the_cpu_pools_resources(flights_spec):
    from kfstack.kubernetes import node_pools

    cpu = node_pools.get_profile(node_pools.CPU_POOL)
    for name, executor in flights_spec["deploymentSpec"]["executors"].items():
        resources = executor["container"]["resources"]
        assert resources["resourceCpuRequest"] == cpu.cpu, name
        assert resources["resourceMemoryRequest"] == cpu.memory, name


def test_every_executor_uses_the_versioned_image_and_installs_nothing(flights_spec):
    executors = flights_spec["deploymentSpec"]["executors"]
    assert executors
    for name, executor in executors.items():
        container = executor["container"]
        assert container["image"] == images.image_for("launcher"), name
        assert container["image"].endswith(":" + __version__)
        script = " ".join(container["command"] + container.get("args", []))
        assert "pip install" not in script, f"{name} installs packages at start"


def test_image_reference_follows_registry_override(monkeypatch):
    monkeypatch.setenv("KFSTACK_IMAGE_REGISTRY", "registry.example.com/ml/")
    assert images.image_for("spark") == f"registry.example.com/ml/kfstack-spark:{__version__}"
    with pytest.raises(ValueError, match="unknown image role"):
        images.image_for("nope")


def test_parse_params_types_values_from_the_pipeline_signature():
    args = parse_params(["workers=3", "learning_rate=0.01", "data_uri=/d", "epochs=2"], "flights-training")
    assert args == {"workers": 3, "learning_rate": 0.01, "data_uri": "/d", "epochs": 2}
    with pytest.raises(UsageError, match="unknown parameter"):
        parse_params(["wokers=3"], "flights-training")
    with pytest.raises(UsageError, match="workers='two'"):
        parse_params(["workers=two"], "flights-training")
    with pytest.raises(UsageError, match="expected NAME=VALUE"):
        parse_params(["workers"], "flights-training")


def test_defaults_live_once_in_the_settings_classes(flights_spec):
    from kfstack.kubernetes.placement import TrainingPlacement
    from kfstack_examples.flights.training.settings import TrainingSettings

    params = flights_spec["root"]["inputDefinitions"]["parameters"]
    assert params["epochs"]["defaultValue"] == TrainingSettings.epochs
    # Settings are compiled in at the same defaults.
    assert compiled_setting(flights_spec, "gpu_pool") == TrainingPlacement.node_pool
    assert compiled_setting(flights_spec, "training_timeout_seconds") == TrainingPlacement.timeout_seconds


def test_unknown_pipeline_name_is_rejected():
    with pytest.raises(UsageError, match="unknown pipeline"):
        load_pipeline("no-such-pipeline")


@pytest.fixture(scope="module")
def retraining(tmp_path_factory):
    return compile_one("flights-retraining", tmp_path_factory.mktemp("dist-retraining"))


def test_flights_retraining_task_graph(retraining):
    spec, platform = retraining
    components = spec["components"]
    body = components["comp-exit-handler-1"]["dag"]["tasks"]
    assert set(body) == {
        "validate-run",
        "data-window",
        "production-model",
        "spark-job",
        "data-drift",
        "condition-2",
    }
    # What changes between runs under the same arguments is never answered from KFP's cache:
    # the window relative to the run's time, production, and the data read for that window.
    for uncached in ("data-window", "production-model", "spark-job"):
        assert body[uncached]["cachingOptions"] == {}, uncached
    window = body["data-window"]["inputs"]["parameters"]
    assert window["scheduled_time"]["runtimeValue"]["constant"] == "{{$.pipeline_job_schedule_time_utc}}"
    assert window["created_time"]["runtimeValue"]["constant"] == "{{$.pipeline_job_create_time_utc}}"
    # The feature job is the generic Spark step: its window and reference profile, upstream
    # outputs, reach its argv as placeholders the backend resolves inside the list.
    features = body["spark-job"]["inputs"]["parameters"]
    argv = features["spark_arguments"]["runtimeValue"]["constant"]
    assert (
        "--reference-profile-uri={{$.inputs.parameters['pipelinechannel--production-model-profile_uri']}}"
        in argv
    )
    assert "--window-start={{$.inputs.parameters['pipelinechannel--data-window-start']}}" in argv
    assert features["pipelinechannel--data-window-start"] == {
        "taskOutputParameter": {"outputParameterKey": "start", "producerTask": "data-window"}
    }
    assert (
        features["spark_application"]["runtimeValue"]["constant"] == "kfstack_examples.flights.features_job"
    )
    # The drift check decides the training branch; the gate decides the deployment inside it.
    assert body["condition-2"]["triggerPolicy"]["condition"] == (
        "inputs.parameter_values['pipelinechannel--data-drift-Output'] == true"
    )
    drifted = components["comp-condition-2"]["dag"]["tasks"]
    assert set(drifted) == {
        "hyperparameter-tuning",
        "distributed-training",
        "model-evaluation",
        "gate-model",
        "condition-3",
    }
    assert drifted["condition-3"]["triggerPolicy"]["condition"] == (
        "inputs.parameter_values['pipelinechannel--gate-model-Output'] == 'challenger'"
    )
    assert set(components["comp-condition-3"]["dag"]["tasks"]) == {"model-deployment", "register-model"}
    assert drifted["gate-model"]["inputs"]["artifacts"]["champion"] == {
        "componentInputArtifact": "pipelinechannel--production-model-model"
    }
    # The new steps read production and artifacts on a cluster: the object store and namespace.
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    for step in ("production-model", "data-drift", "gate-model", "data-window"):
        assert executors[f"exec-{step}"]["secretAsEnv"][0]["optional"] is True, step
        assert executors[f"exec-{step}"]["fieldPathAsEnv"][0]["fieldPath"] == "metadata.namespace"
    assert compiled_setting(spec, "canary_max_psi") == 0.0
    assert compiled_setting(spec, "drift_ignore_features") == "month,day_of_year"


def test_the_pipelines_share_their_parameters_defaults_but_where_said():
    training = declared_parameters(load_pipeline("flights-training"))
    retrain = declared_parameters(load_pipeline("flights-retraining"))
    # On purpose: a retrained model is meant to predict differently (see its description). And
    # flights-training's deployment leaves the features live drift ignores to the flights
    # predictor's own (the calendar: the same ones), where the retraining's drift check needs
    # them named.
    differing = {"canary_max_psi", "drift_ignore_features"}
    assert set(training.names) <= set(retrain.names)
    for name in set(training.names) - differing:
        assert training[name].default == retrain[name].default, name
        assert training[name].description == retrain[name].description, name
    assert training["canary_max_psi"].default != retrain["canary_max_psi"].default


@pytest.fixture(scope="module")
def every_pipeline(compiled, retraining, tmp_path_factory) -> dict[str, tuple[dict, dict]]:
    """Every registered pipeline's (pipeline spec, platform spec); the flights ones compiled once."""
    known = {"flights-training": compiled, "flights-retraining": retraining}
    out = tmp_path_factory.mktemp("dist-every")
    return {name: known.get(name) or compile_one(name, out) for name in pipeline_names()}


def test_only_the_deployment_task_joins_the_mesh_and_cleanup_follows_the_launch_namespace(every_pipeline):
    """The deployment task's pod is labelled into the Istio mesh (the label wins over KFP's
    opt-out annotation; its canary calls need a mesh identity), no other task's is; the exit
    handler cleans up in the launch namespace the run's steps launched in."""
    assert set(every_pipeline) == {"flights-training", "flights-retraining", "digits-training"}
    for name, (spec, platform) in every_pipeline.items():
        executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
        joined = {
            executor
            for executor, config in executors.items()
            if config.get("podMetadata", {}).get("labels", {}).get(SIDECAR_INJECT_LABEL) is not None
        }
        assert joined == {"exec-model-deployment"}, name
        labels = executors["exec-model-deployment"]["podMetadata"]["labels"]
        assert labels[SIDECAR_INJECT_LABEL] == "true", name
        # The version's launch namespace, compiled in: not overridable per run.
        cleanup = spec["root"]["dag"]["tasks"]["cleanup-run"]["inputs"]["parameters"]
        assert cleanup["launch_namespace"] == {"runtimeValue": {"constant": ""}}, name
        assert "launch_namespace" not in spec["root"]["inputDefinitions"]["parameters"], name
