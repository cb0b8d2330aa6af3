"""``kfstack compile/upload/describe --env``: an environment's settings compiled into a pipeline
version, and the run form described as a person reads it."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from kfstack.app import cli
from kfstack.pipeline_spec import VERSION_LABEL, compiled_setting
from tests.app import fake_kfp_server

FLIGHTS = "flights-training"
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
DEV = str(REPO_ROOT / "manifests" / "overlays" / "dev" / "pipeline-parameters.yaml")
fake_kfp = fake_kfp_server.fake_kfp


def root_parameters(path: pathlib.Path) -> dict:
    spec = next(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    return spec["root"]["inputDefinitions"]["parameters"]


def test_compile_env_writes_the_environments_defaults_and_names_the_version(capsys, tmp_path):
    assert (
        cli.main(["compile", FLIGHTS, "--env", DEV, "--pipeline-version", "1.2.3", "--out", str(tmp_path)])
        == 0
    )
    (written,) = tmp_path.iterdir()
    assert written.name == f"{FLIGHTS}-1.2.3.dev.yaml"
    spec = next(yaml.safe_load_all(written.read_text(encoding="utf-8")))
    parameters = root_parameters(written)
    dev = yaml.safe_load(pathlib.Path(DEV).read_text(encoding="utf-8"))["parameters"]
    # Compiled into the version, where its steps read them (the run form does not show them).
    for name, value in dev.items():
        assert compiled_setting(spec, name) == value, name
        assert name not in parameters, name
    # The tasks (and so the model's lineage) carry the version itself: `kfstack reproduce`
    # compares it with a checkout's, which has no environment.
    text = written.read_text(encoding="utf-8")
    assert "value: 1.2.3\n" in text and "1.2.3.dev" not in text
    # What the environment does not set keeps the pipeline's own default.
    assert parameters["workers"]["defaultValue"] == 2.0
    assert compiled_setting(spec, "serving_mode") == "serverless"
    # And a compile without it has the pipeline's own.
    other = tmp_path / "plain"
    assert cli.main(["compile", FLIGHTS, "--pipeline-version", "1.2.3", "--out", str(other)]) == 0
    plain = next(yaml.safe_load_all((other / f"{FLIGHTS}-1.2.3.yaml").read_text(encoding="utf-8")))
    assert compiled_setting(plain, "gpu_pool") == "h100"


def pod_labels(path: pathlib.Path) -> dict[str, dict[str, str]]:
    """Executor -> its pod's labels, of a compiled pipeline."""
    documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    executors = documents[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    return {name: executor.get("podMetadata", {}).get("labels", {}) for name, executor in executors.items()}


@pytest.mark.parametrize(
    ("env", "joins"),
    [("dev", set()), ("prod", {"exec-model-deployment"})],
)
def test_an_environment_outside_the_mesh_compiles_no_task_into_it(tmp_path, env, joins):
    """dev sets istio_mesh false: its version's deployment task does not ask to join a mesh
    (Istio's injector would inject it on a cluster with Istio); prod's does, as a compile without
    an environment does (tests/pipelines/test_compile.py)."""
    argv = ["compile", FLIGHTS, "--pipeline-version", "1.2.3", "--out", str(tmp_path)]
    path = REPO_ROOT / "manifests" / "overlays" / env / "pipeline-parameters.yaml"
    assert cli.main([*argv, "--env", str(path)]) == 0
    (written,) = tmp_path.iterdir()
    labels = pod_labels(written)
    assert {name for name, pod in labels.items() if pod.get("sidecar.istio.io/inject") == "true"} == joins
    # Only that label goes: every executor keeps its version label.
    assert all(pod.get(VERSION_LABEL) == "1.2.3" for pod in labels.values())


def test_compile_env_with_a_bad_value_writes_nothing(capsys, tmp_path):
    env = tmp_path / "broken.yaml"
    env.write_text("parameters:\n  spark_executor_memory: lots\n", encoding="utf-8")
    out = tmp_path / "out"
    assert cli.main(["compile", FLIGHTS, "--env", str(env), "--out", str(out)]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "broken.yaml: flights-training:" in err and "spark_executor_memory='lots'" in err
    assert not out.exists()


def test_upload_env_uploads_the_environments_version(capsys, fake_kfp):
    argv = ["upload", FLIGHTS, "--env", DEV, "--pipeline-version", "1.2.3", "--host", fake_kfp.url]
    assert cli.main(argv) == 0, capsys.readouterr().err
    pipeline = fake_kfp.pipeline_named(FLIGHTS)
    (version,) = fake_kfp.versions_of(pipeline["pipeline_id"])
    assert version["display_name"] == "1.2.3.dev"
    (uploaded,) = fake_kfp.calls("POST", "/pipelines/upload_version")
    assert compiled_setting(uploaded.body["spec"], "gpu_pool") == "h100-spot"


def test_upload_env_with_an_unknown_parameter_uploads_nothing(capsys, tmp_path, fake_kfp):
    env = tmp_path / "typo.yaml"
    env.write_text("parameters:\n  gpu_pol: h100\n", encoding="utf-8")
    argv = ["upload", FLIGHTS, "--env", str(env), "--host", fake_kfp.url]
    assert cli.main(argv) == cli.EXIT_BAD_INPUT
    assert "no pipeline takes the parameter gpu_pol" in capsys.readouterr().err
    assert fake_kfp.requests == []  # checked before the server heard of it


def sections(out: str) -> dict[str, list[str]]:
    """Heading -> the parameter names listed under it in ``describe``'s output."""
    found: dict[str, list[str]] = {}
    heading = None
    for line in out.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            heading = line[:-1]
            found[heading] = []
        elif heading and line.startswith("  ") and not line.startswith("   "):
            found[heading].append(line.split()[0])
    return found


def test_describe_shows_the_per_run_parameters_first_then_the_environments_by_group(capsys):
    from kfstack.pipelines import load_pipeline
    from kfstack.pipelines.parameters import PER_RUN, declared_parameters

    assert cli.main(["describe", FLIGHTS]) == 0
    listed = sections(capsys.readouterr().out)
    declared = declared_parameters(load_pipeline(FLIGHTS))
    assert declared is not None
    titles = list(listed)
    assert titles[0].startswith("per run")
    assert listed[titles[0]] == [p.name for p in declared if p.group == PER_RUN]
    assert listed[titles[0]][:3] == ["data_uri", "window_start", "window_end"]
    # Every parameter once, the platform's settings under their groups.
    names = [name for group in listed.values() for name in group]
    assert sorted(names) == sorted(declared.names) and len(names) == len(set(names))
    assert "gpu_pool" in listed["cluster (settings: the defaults, which an environment file can set)"]


def test_describe_env_shows_the_environments_defaults(capsys):
    assert cli.main(["describe", FLIGHTS, "--env", DEV]) == 0
    out = capsys.readouterr().out
    assert "cluster (settings: dev's values):" in out
    assert "  gpu_pool  (str, default 'h100-spot')" in out


@pytest.mark.parametrize("command", ["compile", "upload", "describe"])
def test_a_missing_environment_is_bad_input(capsys, tmp_path, command):
    argv = [command, FLIGHTS, "--env", str(tmp_path / "nope.yaml")]
    if command == "upload":
        argv += ["--host", "http://127.0.0.1:9"]
    assert cli.main(argv) == cli.EXIT_BAD_INPUT
    assert "no environment" in capsys.readouterr().err
