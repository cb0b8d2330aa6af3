"""The Katib Experiment: built from a tuning spec and a real trial job, compared as data with
recorded fixtures, round-tripped through the kubeflow-katib-api models, its trial job validated
against that job's CRD; the requests Katib would refuse or break are refused first; and the
launcher runs it against the fake API server (succeeded, failed, timeout, adopt, cancel), after
which its Trials are read back.

The scripted ``status`` objects are what Katib v0.19's controllers report (experiment
``status_util.go``, trial ``util.go``). Regenerate the fixtures after an intended change with
``.venv/bin/python -m tests.kubernetes.test_katib_experiment`` and review the diff.
"""

import dataclasses
import json
import os
import pathlib
import signal
from collections.abc import Callable

import pytest
import yaml
from kubeflow_katib_api.models import V1beta1Experiment
from kubernetes import client

from kfstack.errors import CancelledError, InvalidParameterError, ResourceFailedError, ResourceTimeoutError
from kfstack.kubernetes import naming, resources
from kfstack.kubernetes.katib_experiment import (
    RUN_PLACEHOLDER,
    TRIAL_NAME,
    ExperimentRequest,
    TrialParameterRef,
    build_experiment,
    primary_command_line,
    trial_parameters,
)
from kfstack.kubernetes.katib_result import read_trials, tuning_result
from kfstack.kubernetes.launcher import Cluster, delete_run_resources, launch, termination_message
from kfstack.kubernetes.placement import Placement
from kfstack.kubernetes.train_job import build_trainjob
from kfstack.kubernetes.training_jobs import ElasticSettings, build_pytorchjob, build_tfjob
from kfstack.pipeline_spec import artifact_placeholder, output_placeholder
from kfstack.settings import katib_parameter
from kfstack.training.settings import PARAMETER_SERVER, PYTORCH, TENSORFLOW
from kfstack.tuning import metric_lines, trials
from kfstack.tuning.spec import TuningSettings
from kfstack_examples.flights.pipelines.training import FLIGHTS
from kfstack_examples.flights.training.settings import OBJECTIVE, TRAINER_CODE
from tests.kubernetes.conftest import NAMESPACE, RUN_ID, master_pod_labels, training_request
from tests.kubernetes.test_launcher import FakeClock, condition
from tests.upstream_crds import validate_with_crds

# The flights trainers' tuning, as the flights pipelines declare it.
# The flights pipelines' search space, as their declaration writes it.
SEARCH_SPACE = json.dumps(FLIGHTS.search_space())
FLIGHTS_TUNING = {"code": TRAINER_CODE, "search_space": SEARCH_SPACE, "objective": OBJECTIVE}


def tuning_settings(**overrides) -> TuningSettings:
    return TuningSettings(**{**FLIGHTS_TUNING, **overrides})


FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "katib_experiment"
PLURAL = "experiments"
COLLECTION = f"/apis/kubeflow.org/v1beta1/namespaces/{NAMESPACE}/{PLURAL}"
TASK = "hyperparameter-tuning"
NAME = naming.resource_name("kfs-tune", RUN_ID, TASK)
TRIAL_DIR = f"s3://bucket/tuning/{katib_parameter(TRIAL_NAME)}"

# --- requests -----------------------------------------------------------------------------------


def trial_job(kind: resources.ResourceKind, tuning: TuningSettings, **overrides) -> dict:
    """A real job of ``kind`` as the builders make it, the trainer's tuned arguments and its
    model and checkpoint URIs carrying Katib placeholders."""
    hyperparameters = {
        "framework": TENSORFLOW if kind is resources.TFJOB else PYTORCH,
        "epochs": tuning.trial_epochs,
        "batch_size": katib_parameter("batch_size"),
        "learning_rate": katib_parameter("learning_rate"),
    }
    fields = {
        "name": naming.resource_name("kfs-train", RUN_ID, TASK),
        "labels": naming.run_labels(RUN_ID, TASK),
        "args": TRAINER_CODE.argv(hyperparameters),
        "env": {
            "KFSTACK_INPUT_URI": "s3://bucket/features",
            "KFSTACK_MODEL_URI": f"{TRIAL_DIR}/model",
            "KFSTACK_CHECKPOINT_URI": f"{TRIAL_DIR}/checkpoints",
        },
        "checkpoint_uri": f"{TRIAL_DIR}/checkpoints",
        **overrides,
    }
    if kind is resources.TFJOB:
        return build_tfjob(training_request(**fields))
    if kind is resources.TRAINJOB:
        return build_trainjob(training_request(**fields))
    return build_pytorchjob(training_request(**fields))


def experiment_request(
    kind: resources.ResourceKind = resources.PYTORCHJOB,
    tuning: TuningSettings | None = None,
    job: dict | None = None,
    **overrides,
) -> ExperimentRequest:
    tuning = tuning or tuning_settings(goal=0.78, algorithm_settings='{"random_state": 7}')
    fields = {
        "name": NAME,
        "labels": naming.run_labels(RUN_ID, TASK),
        "tuning": tuning,
        "trial_job": job if job is not None else trial_job(kind, tuning),
        "trial_kind": kind,
        "trial_parameters": trial_parameters(tuning),
        **overrides,
    }
    return ExperimentRequest(**fields)


def tfjob_case() -> ExperimentRequest:
    tuning = tuning_settings(
        algorithm="bayesianoptimization",
        algorithm_settings='{"base_estimator": "GP", "n_initial_points": 4}',
        search_space=json.dumps(
            {
                "learning_rate": {"type": "double", "min": 0.0001, "max": 0.01, "scale": "log"},
                "batch_size": {"type": "int", "min": 256, "max": 2048, "step": 256},
            }
        ),
        objective="val_log_loss",
        direction="minimize",
        metric_strategy="latest",
        early_stopping="none",
        parallel_trials=2,
        max_trials=8,
        max_failed_trials=2,
        resume_policy="LongRunning",
    )
    job = trial_job(resources.TFJOB, tuning, topology=PARAMETER_SERVER, parameter_servers=2)
    return experiment_request(resources.TFJOB, tuning, job)


def trainjob_case() -> ExperimentRequest:
    tuning = tuning_settings(
        algorithm="random",
        search_space=json.dumps(
            {
                "learning_rate": {"type": "double", "min": 0.001, "max": 0.01, "step": 0.001},
                "batch_size": {"type": "discrete", "values": [512, 1024]},
            }
        ),
        goal=0.9,
        objective="val_accuracy",
        resume_policy="FromVolume",
    )
    return experiment_request(resources.TRAINJOB, tuning)


# Each a different corner of the spec: goal or none, early stopping or none, each resume policy,
# log / linear / stepped ranges and discrete lists, both directions, each trial kind.
CASES: dict[str, Callable[[], ExperimentRequest]] = {
    "pytorchjob": lambda: experiment_request(resources.PYTORCHJOB),
    "tfjob": tfjob_case,
    "trainjob": trainjob_case,
}


def plain(obj):
    """JSON types only (Placeholder strings become str), as the API server would store it."""
    return json.loads(json.dumps(obj))


def build(case: str) -> dict:
    return plain(build_experiment(CASES[case]()))


def regenerate() -> None:
    """Writes every case's fixture from the current builder (review the diff before committing)."""
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for stale in FIXTURES.glob("*.yaml"):
        stale.unlink()
    for case in CASES:
        (FIXTURES / f"{case}.yaml").write_text(yaml.safe_dump(build(case), sort_keys=False))


# --- the manifest --------------------------------------------------------------------------------


def test_every_case_has_its_fixture_and_no_fixture_is_left_over():
    assert sorted(path.stem for path in FIXTURES.glob("*.yaml")) == sorted(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_experiment_is_the_recorded_one(case):
    recorded = yaml.safe_load((FIXTURES / f"{case}.yaml").read_text())
    assert build(case) == recorded


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_katib_models_keep_every_field(case):
    built = build(case)
    assert V1beta1Experiment.model_validate(built).to_dict() == built


def test_every_trial_job_validates_against_its_crd(tmp_path):
    """Katib's CRDs have no field schema; the job each trial creates does. Katib sets its name
    (the trial's); the placeholders stand in string fields and stay valid after substitution."""
    jobs = []
    for case in sorted(CASES):
        template = build(case)["spec"]["trialTemplate"]["trialSpec"]
        jobs.append({**template, "metadata": {**template["metadata"], "name": f"{NAME}-abcdefgh"}})
    assert [job["kind"] for job in jobs] == ["PyTorchJob", "TFJob", "TrainJob"]
    validate_with_crds(tmp_path, jobs)


def test_the_spec_states_katibs_contract():
    request = CASES["pytorchjob"]()
    built = build("pytorchjob")
    spec = built["spec"]
    assert built["metadata"] == {"name": NAME, "labels": naming.run_labels(RUN_ID, TASK)}
    assert spec["objective"] == {
        "additionalMetricNames": ["val_log_loss", "val_accuracy"],
        "goal": 0.78,
        # Stated for every metric: the additional ones at the trial's last report.
        "metricStrategies": [
            {"name": "val_auc", "value": "max"},
            {"name": "val_log_loss", "value": "latest"},
            {"name": "val_accuracy", "value": "latest"},
        ],
        "objectiveMetricName": "val_auc",
        "type": "maximize",
    }
    assert spec["metricsCollectorSpec"] == {
        "collector": {"kind": "StdOut"},
        "source": {"filter": {"metricsFormat": [metric_lines.DEFAULT_FILTER]}},
    }
    assert spec["earlyStopping"]["algorithmSettings"] == [
        {"name": "min_trials_required", "value": str(request.tuning.min_trials_required)},
        {"name": "start_step", "value": str(request.tuning.start_step)},
    ]
    template = spec["trialTemplate"]
    contract = resources.PYTORCHJOB.trial
    assert template["primaryContainerName"] == contract.primary_container == "pytorch"
    assert template["primaryPodLabels"] == contract.primary_pod_labels
    assert (template["successCondition"], template["failureCondition"]) == (
        contract.success_condition,
        contract.failure_condition,
    )
    assert template["retain"] is True
    assert template["trialParameters"][-1] == {
        "description": "the trial's name: each trial keeps its model and checkpoints under it",
        "name": "trial_name",
        "reference": "${trialSpec.Name}",
    }
    # The job as built, less what Katib sets per trial.
    job = plain(request.trial_job)
    del job["metadata"]["name"]
    assert template["trialSpec"] == job
    assert "namespace" not in template["trialSpec"]["metadata"]
    _, command = primary_command_line(template["trialSpec"], resources.PYTORCHJOB)
    assert "--learning_rate=${trialParameters.learning_rate}" in command
    container = template["trialSpec"]["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"][
        "containers"
    ][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["KFSTACK_MODEL_URI"] == "s3://bucket/tuning/${trialParameters.trial_name}/model"


def test_no_goal_no_early_stopping_and_ranges_katib_parses():
    spec = build("tfjob")["spec"]
    assert "goal" not in spec["objective"] and "earlyStopping" not in spec
    assert spec["objective"]["metricStrategies"][0] == {"name": "val_log_loss", "value": "latest"}
    # The additional metrics are stated as latest whatever the direction.
    assert {s["value"] for s in spec["objective"]["metricStrategies"][1:]} == {"latest"}
    assert spec["parameters"][1] == {
        "feasibleSpace": {"distribution": "uniform", "max": "2048", "min": "256", "step": "256"},
        "name": "batch_size",
        "parameterType": "int",
    }
    assert spec["resumePolicy"] == "LongRunning"
    assert spec["trialTemplate"]["primaryContainerName"] == "tensorflow"


def test_metric_strategies_cover_the_objective_and_every_additional_metric():
    # Stated for every metric, so Katib's defaulting (the objective's direction for all of them,
    # e.g. a trial's *lowest* AUC when minimising log loss) never applies.
    tuning = tuning_settings(objective="val_log_loss", direction="minimize")
    assert tuning.metric_strategies == {"val_log_loss": "min", "val_auc": "latest", "val_accuracy": "latest"}
    strategies = build_experiment(experiment_request())["spec"]["objective"]["metricStrategies"]
    assert {s["name"]: s["value"] for s in strategies} == tuning_settings().metric_strategies


@pytest.mark.parametrize(
    ("kind", "overrides", "where"),
    [
        (resources.PYTORCHJOB, {}, "spec.pytorchReplicaSpecs.Master container pytorch"),
        (
            resources.PYTORCHJOB,
            {"elastic": ElasticSettings(min_replicas=2, max_replicas=4, max_restarts=3)},
            "spec.pytorchReplicaSpecs.Worker container pytorch",
        ),
        (resources.TFJOB, {}, "spec.tfReplicaSpecs.Worker container tensorflow"),
        (
            resources.TFJOB,
            {"topology": PARAMETER_SERVER, "parameter_servers": 1},
            "spec.tfReplicaSpecs.Chief container tensorflow",
        ),
        (resources.TRAINJOB, {}, "spec.trainer"),
    ],
)
def test_the_primary_command_line_of_each_kind(kind, overrides, where):
    job = trial_job(kind, tuning_settings(), **overrides)
    found, command = primary_command_line(job, kind)
    assert found == where
    assert command[:2] in (["python", "-m"], ["torchrun", "-m"])
    assert "--batch_size=${trialParameters.batch_size}" in command
    build_experiment(experiment_request(kind, job=job))  # every one is a valid trial


# --- what is refused -----------------------------------------------------------------------------


def with_extra_args(*extra: str, kind=resources.PYTORCHJOB) -> dict:
    tuning = tuning_settings()
    args = TRAINER_CODE.argv(
        {"batch_size": katib_parameter("batch_size"), "learning_rate": katib_parameter("learning_rate")}
    )
    return trial_job(kind, tuning, args=[*args, *extra])


@pytest.mark.parametrize("kind", [resources.PYTORCHJOB, resources.TFJOB, resources.TRAINJOB])
@pytest.mark.parametrize(
    ("arg", "problem"),
    [
        ("--note=two words", "holds whitespace or a shell metacharacter"),
        ("--filter=a;rm", "holds whitespace or a shell metacharacter"),
        ('--config={"a":1}', "holds whitespace or a shell metacharacter"),
        ("--glob=*.parquet", "holds whitespace or a shell metacharacter"),
        ("", "is empty"),
    ],
)
def test_an_argument_sh_c_would_break_is_refused(kind, arg, problem):
    request = experiment_request(kind, job=with_extra_args(arg, kind=kind))
    with pytest.raises(InvalidParameterError) as err:
        build_experiment(request)
    message = str(err.value)
    assert f"argument {arg!r} {problem}" in message
    assert "`sh -c`" in message and "pass such a value through a file or an environment variable" in message


def test_an_unsafe_argument_is_found_with_the_trials_values_substituted():
    job = with_extra_args(f"--tag=lr:{katib_parameter('learning_rate')}|x")
    with pytest.raises(InvalidParameterError, match=r"\(as '--tag=lr:0\.0003\|x' with a trial's values\)"):
        build_experiment(experiment_request(job=job))
    # The same argument without the pipe is safe with every value the placeholder can take.
    build_experiment(experiment_request(job=with_extra_args(f"--tag=lr:{katib_parameter('learning_rate')}")))


def test_a_value_only_the_pipeline_run_knows_passes_the_shell_check():
    """`kfstack render` builds the Experiment with marked placeholders for artifact URIs and
    earlier tasks' outputs; the run builds it again with the real values, checked then."""
    artifact = artifact_placeholder("flights-features", "features")
    output = output_placeholder("size-trials", "epochs")
    assert RUN_PLACEHOLDER.fullmatch(artifact) and RUN_PLACEHOLDER.fullmatch(output)
    build_experiment(experiment_request(job=with_extra_args(f"--extra={artifact}", output, f"{output}/x")))
    with pytest.raises(InvalidParameterError, match="holds whitespace"):
        build_experiment(experiment_request(job=with_extra_args(f"{artifact} two")))


def test_a_placeholder_no_trial_parameter_declares_is_refused():
    job = with_extra_args("--momentum", "${trialParameters.momentum}")
    with pytest.raises(InvalidParameterError) as err:
        build_experiment(experiment_request(job=job))
    assert "uses ${trialParameters.momentum}, which no trial parameter declares" in str(err.value)
    assert "declared: batch_size, learning_rate, trial_name" in str(err.value)


def test_a_trial_parameter_the_job_never_uses_is_refused():
    tuning = tuning_settings()
    extra = TrialParameterRef("namespace", "the trial's namespace", "${trialSpec.Namespace}")
    request = experiment_request(tuning=tuning, trial_parameters=(*trial_parameters(tuning), extra))
    with pytest.raises(
        InvalidParameterError, match=r"trial parameter\(s\) namespace appear nowhere in the trial"
    ):
        build_experiment(request)


def test_a_tuned_parameter_no_trial_parameter_takes_is_refused():
    tuning = tuning_settings()
    (learning_rate, batch_size, name) = trial_parameters(tuning)
    request = experiment_request(
        tuning=tuning,
        trial_parameters=(learning_rate, dataclasses.replace(batch_size, reference="epochs"), name),
    )
    with pytest.raises(InvalidParameterError, match="references 'epochs', which is not tuned"):
        build_experiment(request)
    request = experiment_request(tuning=tuning, trial_parameters=(learning_rate, name))
    with pytest.raises(InvalidParameterError, match="batch_size reach no trial parameter"):
        build_experiment(request)


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"name": "kfs-tune-" + "a" * 40}, "at most 40 characters"),
        ({"name": "Tune"}, "must be a DNS label"),
        ({"trial_kind": resources.TFJOB}, "is a kubeflow.org/v1 PyTorchJob, not the kubeflow.org/v1 TFJob"),
        ({"trial_kind": resources.SPARK_APPLICATION}, "SparkApplication cannot run Katib trials"),
        (
            {
                "tuning": tuning_settings(
                    max_trials=4, parallel_trials=2, min_trials_required=2, max_failed_trials=5
                )
            },
            "tuning_max_failed_trials=5 must be <= tuning_max_trials=4",
        ),
    ],
)
def test_requests_katib_would_refuse_are_refused_first(overrides, match):
    with pytest.raises(InvalidParameterError, match=match):
        build_experiment(experiment_request(**overrides))


# --- resources: the Experiment and Trial kinds ---------------------------------------------------


def experiment_status(*conditions: dict, **fields) -> dict:
    return {"conditions": [condition("Created", "ExperimentCreated"), *conditions], **fields}


RUNNING = experiment_status(condition("Running", "ExperimentRunning", "Experiment is running"), trials=2)


def no_longer_running() -> dict:
    return {
        "type": "Running",
        "status": "False",
        "reason": "ExperimentRunning",
        "message": "Experiment is running",
    }


def test_the_experiment_phase_follows_its_conditions():
    phase = resources.EXPERIMENT.phase
    assert phase({}) is resources.Phase.PENDING
    assert phase({"status": experiment_status()}) is resources.Phase.PENDING
    assert phase({"status": RUNNING}) is resources.Phase.RUNNING
    assert phase({"status": experiment_status(condition("Restarting"))}) is resources.Phase.RUNNING
    succeeded = experiment_status(no_longer_running(), condition("Succeeded", "ExperimentMaxTrialsReached"))
    assert phase({"status": succeeded}) is resources.Phase.SUCCEEDED
    failed = experiment_status(no_longer_running(), condition("Failed", "ExperimentFailed"))
    assert phase({"status": failed}) is resources.Phase.FAILED
    assert resources.KINDS["Experiment"] is resources.EXPERIMENT
    assert resources.EXPERIMENT.lifecycle is resources.Lifecycle.BATCH
    # Trials are read, never launched, and never deleted one by one by the run cleanup.
    assert resources.TRIAL not in resources.KINDS.values()


def test_a_trials_phase_and_primary_pod():
    trial = katib_trial(f"{NAME}-t1", "2025-01-01T10:00:00Z", trials.METRICS_UNAVAILABLE, {})
    assert resources.TRIAL.phase(trial) is resources.Phase.FAILED
    assert resources.TRIAL.phase(katib_trial("t", "2025-01-01T10:00:00Z", trials.EARLY_STOPPED, {})).finished
    assert resources.TRIAL.phase(katib_trial("t", "2025-01-01T10:00:00Z", trials.RUNNING, {})) is (
        resources.Phase.RUNNING
    )
    template = build("tfjob")["spec"]["trialTemplate"]
    run_spec = {
        **template["trialSpec"],
        "metadata": {**template["trialSpec"]["metadata"], "name": f"{NAME}-t1"},
    }
    trial["spec"].update(runSpec=run_spec, primaryContainerName="tensorflow")
    ref = resources.TRIAL.primary_pod(trial)
    assert "training.kubeflow.org/replica-type=chief" in ref.selector and ref.container == "tensorflow"
    trial["spec"]["runSpec"] = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"{NAME}-t1"}}
    assert resources.TRIAL.primary_pod(trial).selector == f"katib.kubeflow.org/trial={NAME}-t1"


# --- the launcher, against the fake API ----------------------------------------------------------


def cluster_for(fake_api, clock=None) -> Cluster:
    clock = clock or FakeClock()
    return Cluster(fake_api.api_client(), NAMESPACE, sleep=clock.sleep, clock=clock)


def placement(timeout: int = 3600) -> Placement:
    return Placement(node_pool="cpu", timeout_seconds=timeout, poll_interval_seconds=30)


def observation(**metrics: tuple[str, str, str]) -> dict:
    return {
        "metrics": [
            {"name": name, "min": low, "max": high, "latest": latest}
            for name, (low, high, latest) in metrics.items()
        ]
    }


def katib_trial(
    name: str,
    created: str,
    outcome: str,
    assignments: dict[str, str],
    metrics: dict | None = None,
    message: str = "",
    minutes: int = 12,
) -> dict:
    """A Trial as Katib's controllers leave it (labels from the Experiment, conditions, times)."""
    conditions = [condition("Created", "TrialCreated", "Trial is created")]
    if outcome == trials.RUNNING:
        conditions.append(condition("Running", "TrialRunning", "Trial is running"))
    else:
        conditions += [
            {"type": "Running", "status": "False", "reason": "TrialRunning", "message": "Trial is running"},
            condition(outcome, f"Trial{outcome}", message),
        ]
    status = {"startTime": created, "conditions": conditions}
    if outcome != trials.RUNNING:
        start_minute = int(created[14:16])
        status["completionTime"] = f"{created[:14]}{start_minute + minutes:02d}{created[16:]}"
    if metrics is not None:
        status["observation"] = metrics
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Trial",
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "labels": {**naming.run_labels(RUN_ID, TASK), "katib.kubeflow.org/experiment": NAME},
        },
        "spec": {"parameterAssignments": [{"name": k, "value": v} for k, v in assignments.items()]},
        "status": status,
    }


def terminated(container: str, message: str, restarted: bool = False) -> dict:
    """A container status: terminated with ``message`` (or running again after it did)."""
    state = {"terminated": {"exitCode": 1, "reason": "Error", "message": message}}
    status = {
        "name": container,
        "image": "registry.example/kfstack-torch-trainer:0.0.0",
        "imageID": "",
        "ready": False,
        "restartCount": int(restarted),
        "state": {"running": {"startedAt": "2025-01-01T10:30:00Z"}} if restarted else state,
    }
    if restarted:
        status["lastState"] = state
    return status


def master_pod(fake_api, trial: str, message: str, restarted: bool = False) -> str:
    """The trial's PyTorchJob master pod, labelled as the operator and Katib label it; its log is
    empty (Katib's StdOut collector sends the output to its metrics file)."""
    name = f"{trial}-master-0"
    labels = {
        **master_pod_labels(trial),
        "training.kubeflow.org/job-role": "master",
        "katib.kubeflow.org/trial": trial,
    }
    fake_api.add_pod(
        name, NAMESPACE, labels, log="", container_statuses=[terminated("pytorch", message, restarted)]
    )
    return name


def experiment() -> dict:
    return build_experiment(experiment_request())


def test_succeeded_then_its_trials_and_best_are_read_back(fake_api):
    body = experiment()
    tuning = experiment_request().tuning
    best = observation(val_auc=("0.70", "0.79", "0.78"), val_log_loss=("0.46", "0.52", "0.47"))
    optimal = {
        "bestTrialName": f"{NAME}-b2",
        "parameterAssignments": [
            {"name": "learning_rate", "value": "0.0021"},
            {"name": "batch_size", "value": "1024"},
        ],
        "observation": best,
    }
    done = experiment_status(
        no_longer_running(),
        condition(
            "Succeeded",
            "ExperimentGoalReached",
            "Experiment has succeeded because Objective goal has reached",
        ),
        trials=3,
        trialsSucceeded=2,
        trialsEarlyStopped=1,
        currentOptimalTrial=optimal,
    )
    fake_api.statuses[NAME] = [experiment_status(), RUNNING, done]
    # Listed in name order, as the API lists them; read back in creation order.
    fake_api.put(
        "trials",
        NAMESPACE,
        katib_trial(
            f"{NAME}-a1",
            "2025-01-01T10:20:00Z",
            trials.EARLY_STOPPED,
            {"learning_rate": "0.0291", "batch_size": "512"},
            observation(val_auc=("0.55", "0.61", "0.61"), val_log_loss=("0.66", "0.70", "0.66")),
            message="Trial is early stopped",
            minutes=3,
        ),
    )
    fake_api.put(
        "trials",
        NAMESPACE,
        katib_trial(
            f"{NAME}-b2",
            "2025-01-01T10:00:00Z",
            trials.SUCCEEDED,
            {"learning_rate": "0.0021", "batch_size": "1024"},
            best,
            message="Trial has succeeded",
        ),
    )
    fake_api.put(
        "trials",
        NAMESPACE,
        katib_trial(
            f"{NAME}-c3",
            "2025-01-01T10:01:00Z",
            trials.SUCCEEDED,
            {"learning_rate": "0.0004", "batch_size": "2048"},
            observation(val_auc=("0.60", "0.74", "unavailable")),
        ),
    )
    another = katib_trial("other-experiment-x", "2025-01-01T09:00:00Z", trials.SUCCEEDED, {})
    another["metadata"]["labels"]["katib.kubeflow.org/experiment"] = "other-experiment"
    fake_api.put("trials", NAMESPACE, another)
    cluster = cluster_for(fake_api)

    final, reference = launch(body, placement(), cluster)

    assert reference["kind"] == "Experiment" and reference["name"] == NAME
    assert fake_api.count("POST", COLLECTION) == 1 and fake_api.count("DELETE") == 0
    records = read_trials(cluster, final, tuning)
    assert [r.name for r in records] == [f"{NAME}-b2", f"{NAME}-c3", f"{NAME}-a1"]
    b2, c3, a1 = records
    assert b2.status == trials.SUCCEEDED and b2.parameters == {
        "learning_rate": "0.0021",
        "batch_size": "1024",
    }
    # Every metric under its strategy: the objective's max, the others' latest.
    assert b2.objective == 0.79 and b2.metrics == {"val_auc": 0.79, "val_log_loss": 0.47}
    assert (b2.seconds, b2.history, b2.message) == (12 * 60, [], "Trial has succeeded")
    assert c3.objective == 0.74  # max stated; the unavailable latest does not matter
    assert a1.status == trials.EARLY_STOPPED and a1.message == "Trial is early stopped" and a1.seconds == 180
    assert fake_api.count("GET", f"/apis/kubeflow.org/v1beta1/namespaces/{NAMESPACE}/trials") == 1

    result = tuning_result(final, records, tuning)
    assert result.best is not None and result.best.name == f"{NAME}-b2"
    assert result.best.parameters == {"learning_rate": "0.0021", "batch_size": "1024"}
    assert result.best.objective == 0.79 and result.best.status == trials.SUCCEEDED
    assert result.goal_reached is True and result.reason == "ExperimentGoalReached"
    assert (result.algorithm, result.objective, result.direction) == ("tpe", "val_auc", "maximize")
    assert result.metrics()["trials_early_stopped"] == 1.0 and result.metrics()["best_val_auc"] == 0.79


def test_a_trial_record_takes_latest_where_the_extreme_is_unavailable_and_no_outcome_is_running(fake_api):
    tuning = tuning_settings(objective="val_log_loss", direction="minimize")
    running = katib_trial(f"{NAME}-r1", "2025-01-01T10:00:00Z", trials.RUNNING, {"batch_size": "512"})
    no_metrics = katib_trial(
        f"{NAME}-m1",
        "2025-01-01T10:05:00Z",
        trials.METRICS_UNAVAILABLE,
        {"batch_size": "1024"},
        observation(val_log_loss=("unavailable", "unavailable", "unavailable")),
        message="Metrics are not available",
    )
    extreme_missing = katib_trial(
        f"{NAME}-s1",
        "2025-01-01T10:06:00Z",
        trials.SUCCEEDED,
        {"batch_size": "2048"},
        observation(val_log_loss=("unavailable", "0.61", "0.5")),
    )
    for trial in (running, no_metrics, extreme_missing):
        fake_api.put("trials", NAMESPACE, trial)
    final = {"metadata": {"name": NAME, "namespace": NAMESPACE}, "spec": {}}
    r1, m1, s1 = read_trials(cluster_for(fake_api), final, tuning)
    assert (r1.status, r1.seconds, r1.objective) == (trials.RUNNING, None, None)
    assert (m1.status, m1.objective, m1.message) == (
        trials.METRICS_UNAVAILABLE,
        None,
        "Metrics are not available",
    )
    assert s1.objective == 0.5  # min was unavailable: Katib takes the latest
    result = tuning_result(final, [r1, m1, s1], tuning)
    assert result.best is None and result.goal_reached is False and result.reason == ""


def test_failed_reports_the_reason_and_the_last_failed_trials_termination_message(fake_api):
    body = experiment()
    first, last = f"{NAME}-f1", f"{NAME}-f2"
    failed = experiment_status(
        no_longer_running(),
        condition("Failed", "ExperimentFailed", "Experiment has failed because max failed count has reached"),
        trials=3,
        trialsFailed=3,
        failedTrialList=[f"{NAME}-f0", first, last],
    )
    fake_api.statuses[NAME] = [RUNNING, failed]
    master_pod(fake_api, first, "RuntimeError: an earlier trial's error")
    last_pod = master_pod(fake_api, last, "Traceback (most recent call last):\nValueError: batch_size=2048")
    # Another pod the label selector must not pick: a worker of the same trial.
    fake_api.add_pod(f"{last}-worker-0", NAMESPACE, {"training.kubeflow.org/job-name": last}, log="worker")
    with pytest.raises(ResourceFailedError) as err:
        launch(body, placement(), cluster_for(fake_api))
    message = str(err.value)
    assert f"Experiment {NAMESPACE}/{NAME} failed" in message
    assert (
        "Failed=True reason=ExperimentFailed: Experiment has failed because max failed count has reached"
        in message
    )
    assert "trials: 3 (succeeded 0, failed 3, early stopped 0, metrics unavailable 0, killed 0)" in message
    assert f"pod {last_pod}: container pytorch wrote nothing to its log" in message
    assert (
        f"termination message of container pytorch of pod {last_pod}:\n"
        "Traceback (most recent call last):\nValueError: batch_size=2048"
    ) in message
    assert "an earlier trial's error" not in message
    assert fake_api.count("DELETE") == 0  # a failed Experiment stays for inspection


def test_a_metrics_unavailable_trial_is_reported_when_none_failed_outright():
    body = experiment()
    body["status"] = experiment_status(metricsUnavailableTrialList=[f"{NAME}-m1"])
    ref = resources.EXPERIMENT.primary_pod(body)
    assert f"training.kubeflow.org/job-name={NAME}-m1" in ref.selector
    assert ref.container == "pytorch"


def test_a_trainjob_trials_primary_pod_is_its_node_0():
    body = build_experiment(CASES["trainjob"]())
    body["status"] = experiment_status(failedTrialList=[f"{NAME}-t1"])
    ref = resources.EXPERIMENT.primary_pod(body)
    assert f"jobset.sigs.k8s.io/jobset-name={NAME}-t1" in ref.selector
    assert "batch.kubernetes.io/job-completion-index=0" in ref.selector and ref.container == "node"


def test_the_termination_message_of_a_restarted_container_is_its_last_one():
    api = client.ApiClient()

    class Response:
        data = json.dumps(
            {"metadata": {"name": "p"}, "status": {"containerStatuses": [terminated("pytorch", "OOM", True)]}}
        )

    pod = api.deserialize(Response(), "V1Pod")
    assert termination_message(pod, "pytorch") == "OOM"
    assert termination_message(pod, "tensorflow") == ""


def test_timeout_deletes_the_experiment_and_points_at_the_suggestion(fake_api):
    body = experiment()
    fake_api.statuses[NAME] = [RUNNING]
    clock = FakeClock()
    with pytest.raises(ResourceTimeoutError) as err:
        launch(body, placement(timeout=600), cluster_for(fake_api, clock))
    message = str(err.value)
    assert (
        f"Experiment {NAMESPACE}/{NAME} did not finish within 600s (last phase Running); it was deleted"
        in message
    )
    assert "current optimal trial: none yet" in message
    # No trial failed: the suggestion (algorithm) pod is the one to look at.
    assert f"(no pod matches katib.kubeflow.org/suggestion={NAME})" in message
    assert fake_api.count("DELETE", f"{COLLECTION}/{NAME}") == 1
    assert (PLURAL, NAMESPACE, NAME) not in fake_api.objects
    assert clock.now > 600


def test_a_retried_step_adopts_the_running_experiment(fake_api):
    body = experiment()
    fake_api.put(PLURAL, NAMESPACE, {**body, "status": RUNNING})
    uid = fake_api.objects[(PLURAL, NAMESPACE, NAME)]["metadata"]["uid"]
    done = experiment_status(no_longer_running(), condition("Succeeded", "ExperimentMaxTrialsReached"))
    fake_api.statuses[NAME] = [RUNNING, done]
    final, _ = launch(body, placement(), cluster_for(fake_api))
    assert final["metadata"]["uid"] == uid and resources.EXPERIMENT.phase(final) is resources.Phase.SUCCEEDED
    assert fake_api.count("POST") == 0 and fake_api.count("DELETE") == 0
    assert tuning_result(final, [], experiment_request().tuning).reason == "ExperimentMaxTrialsReached"


def test_sigterm_deletes_the_experiment(fake_api):
    body = experiment()
    fake_api.statuses[NAME] = [RUNNING]
    sent = []

    def cancel_once_created(name):
        if (PLURAL, NAMESPACE, name) in fake_api.objects and not sent:
            sent.append(name)
            os.kill(os.getpid(), signal.SIGTERM)  # what a cancelled KFP task's pod gets

    fake_api.on_read = cancel_once_created
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(CancelledError):
        launch(body, placement(), cluster_for(fake_api))
    assert sent == [NAME]
    assert fake_api.count("POST", COLLECTION) == 1 and fake_api.count("DELETE", f"{COLLECTION}/{NAME}") == 1
    assert (PLURAL, NAMESPACE, NAME) not in fake_api.objects
    assert signal.getsignal(signal.SIGTERM) is previous


def test_the_run_cleanup_deletes_the_unfinished_experiment_and_no_trial(fake_api):
    body = experiment()
    fake_api.put(PLURAL, NAMESPACE, {**body, "status": RUNNING})
    fake_api.put("trials", NAMESPACE, katib_trial(f"{NAME}-r1", "2025-01-01T10:00:00Z", trials.RUNNING, {}))
    deleted = delete_run_resources(RUN_ID, cluster_for(fake_api))
    assert deleted == [f"Experiment/{NAME}"]
    assert ("trials", NAMESPACE, f"{NAME}-r1") in fake_api.objects  # Katib deletes them with it
    assert fake_api.count("GET", "/trials") == 0


if __name__ == "__main__":
    regenerate()
