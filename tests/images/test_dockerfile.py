"""images/Dockerfile: one target per role, all built on the shared `wheel` and `runtime` stages, each
installing only its role's extras and running as UID 1000.

There is no Docker engine here, so the file is parsed by the small parser below (line continuations,
comments, parser directives, `ARG` before the first `FROM`, `FROM x AS name`, instruction flags such
as `COPY --from=` and `RUN --mount=`) and the assertions run on what it reads.
"""

import ast
import dataclasses
import json
import os
import re
import shlex
import tomllib

import pytest

from kfstack import images
from tests.conftest import REPO_ROOT

DOCKERFILE = REPO_ROOT / "images" / "Dockerfile"
WHEEL_STAGE = "wheel"
RUNTIME_STAGE = "runtime"
VENV = "/opt/kfstack/venv"
# The only ARGs allowed to name a base image (and so a registry).
BASE_IMAGE_ARGS = {"PYTHON_IMAGE", "SPARK_IMAGE"}

# Extras of the kfstack wheel and other requirements each role installs.
ROLE_EXTRAS = {
    # The launcher builds InferenceServices with the kserve SDK's models, and registers promoted
    # models with the Model Registry client.
    # It evaluates and checks ONNX models: the onnxruntime distribution (CPU, as the task pods run).
    # Every role whose pods are tracked holds MLflow's client (tracking): a team's own mlflow
    # calls, and kfstack's where KFP's plugin authenticates as the pod (MLFLOW_TRACKING_AUTH).
    "launcher": {"serve", "s3", "registry", "onnxruntime", "tracking"},
    # No example's data: the examples' images add their package on top (examples/Dockerfile).
    "spark": {"spark", "s3", "tracking"},
    # Both trainers check the exported ONNX model against the trained one on rank 0.
    "torch-trainer": {"torch", "s3", "onnxruntime", "tracking"},
    # The tensorflow distribution (not tensorflow-cpu): the one with GPU support.
    "tf-trainer": {"tensorflow", "s3", "onnxruntime", "tracking"},
    "predictor": {"serve", "s3", "onnxruntime"},
}
# Its and-cuda extra brings the CUDA libraries as wheels; the lock holds its release.
ROLE_EXTRA_REQUIREMENTS = {"tf-trainer": {"tensorflow"}}
# Where the wheel stage leaves the lock of its Python (constraints/py<X.Y>.txt).
LOCK_IN_WHEELS = "/wheels/constraints.txt"
# Which framework an extra or a requirement brings; a role may bring only its own.
FRAMEWORK_OF = {
    "spark": "spark",
    "pyspark": "spark",
    "torch": "torch",
    "tf": "tf",
    "tensorflow": "tf",
    "tensorflow-cpu": "tf",
    "tf2onnx": "tf",
    "serve": "serve",
    "kserve": "serve",
}
ROLE_FRAMEWORK = {
    "launcher": {"serve"},
    "spark": {"spark"},
    "torch-trainer": {"torch"},
    "tf-trainer": {"tf"},
    "predictor": {"serve"},
}
SPARK_ENTRYPOINT_SCRIPT = "images/spark-entrypoint.sh"
# The effective ENTRYPOINT of each role; None: none set, the python image's own applies.
ROLE_ENTRYPOINT = {
    "launcher": None,
    "spark": ["/usr/bin/tini", "--", "/opt/kfstack/entrypoint.sh"],
    "torch-trainer": [],
    "tf-trainer": [],
    "predictor": None,
}
# host[:port]/ (a registry) or scheme:// (a URL).
HOST_RE = re.compile(r"\b(?:[a-z0-9-]+\.)+[a-z]{2,}(?::\d+)?/|[a-z][a-z0-9+.-]*://", re.IGNORECASE)
WHEEL_RE = re.compile(r"^(?P<path>\S*/)kfstack-\*\.whl(?:\[(?P<extras>[^\]]*)\])?$")
WHEEL_EXPR_RE = re.compile(r"^\$\(ls (?P<glob>\S+)\)(?:\[(?P<extras>[^\]]*)\])?$")
REQUIREMENT_RE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?(?P<spec>.*)$")


# --- the parser ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Instruction:
    keyword: str  # upper case
    flags: list[tuple[str, str]]  # (name, value) of leading --name=value flags, in order
    args: str  # the rest, continuations joined
    line: int  # where it starts, 1-based
    comments: list[str]  # the comment lines right above it

    def flag(self, name: str) -> list[str]:
        return [value for key, value in self.flags if key == name]

    def json_or_shell(self):
        """Exec form (a JSON array) as a list, shell form as the string."""
        if self.args.startswith("["):
            return json.loads(self.args)
        return self.args


@dataclasses.dataclass
class Stage:
    base: str
    name: str | None
    from_line: Instruction
    instructions: list[Instruction]


@dataclasses.dataclass
class Dockerfile:
    directives: dict[str, str]
    global_args: dict[str, str | None]
    stages: list[Stage]

    def stage(self, name: str) -> Stage:
        (found,) = [s for s in self.stages if s.name == name.lower()]
        return found

    def chain(self, name: str) -> list[Stage]:
        """The stage and the stages it is built FROM, the target first."""
        stages = [self.stage(name)]
        names = {s.name for s in self.stages if s.name}
        while stages[-1].base.lower() in names:
            stages.append(self.stage(stages[-1].base))
            assert len(stages) <= len(self.stages), f"FROM cycle through {name}"
        return stages

    def image_instructions(self, name: str) -> list[Instruction]:
        """Every instruction that shapes the target's image, in build order."""
        return [i for s in reversed(self.chain(name)) for i in s.instructions]


_FLAGGED = {"FROM", "RUN", "COPY", "ADD"}
_DIRECTIVE = re.compile(r"^#\s*([a-zA-Z][a-zA-Z0-9_-]*)\s*=\s*(.*?)\s*$")


def parse_dockerfile(text: str) -> Dockerfile:
    directives: dict[str, str] = {}
    global_args: dict[str, str | None] = {}
    stages: list[Stage] = []
    comments: list[str] = []
    pending: list[str] = []
    start = 0
    in_directives = True

    def finish(logical: str, line: int) -> None:
        keyword, _, rest = logical.strip().partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        flags = []
        while keyword in _FLAGGED and rest.startswith("--"):
            token, _, rest = rest.partition(" ")
            name, _, value = token[2:].partition("=")
            flags.append((name, value))
            rest = rest.strip()
        inst = Instruction(keyword, flags, rest, line, list(comments))
        comments.clear()
        if keyword == "FROM":
            words = rest.split()
            assert len(words) in (1, 3) and (len(words) == 1 or words[1].upper() == "AS"), (
                f"line {line}: FROM {rest!r}"
            )
            stages.append(Stage(words[0], words[2].lower() if len(words) == 3 else None, inst, []))
        elif not stages:
            assert keyword == "ARG", f"line {line}: only ARG may come before the first FROM"
            name, eq, default = rest.partition("=")
            global_args[name.strip()] = default.strip() if eq else None
        else:
            stages[-1].instructions.append(inst)

    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if in_directives:
            match = _DIRECTIVE.match(stripped)
            if match and not pending:
                directives[match.group(1).lower()] = match.group(2)
                continue
            in_directives = False
        if stripped.startswith("#"):
            if not pending:  # a comment line inside a continuation is dropped, as Docker does
                comments.append(stripped.lstrip("#").strip())
            continue
        if not stripped:
            if not pending:
                comments.clear()
            continue
        if not pending:
            start = number
        if raw.rstrip().endswith("\\"):
            pending.append(raw.rstrip()[:-1])
            continue
        pending.append(raw)
        finish(" ".join(part.strip() for part in pending), start)
        pending = []
    assert not pending, "the file ends inside a line continuation"
    return Dockerfile(directives, global_args, stages)


def mount_options(inst: Instruction) -> list[dict[str, str]]:
    return [dict(opt.partition("=")[::2] for opt in value.split(",")) for value in inst.flag("mount")]


def env_pairs(inst: Instruction) -> dict[str, str]:
    pairs = {}
    for word in shlex.split(inst.args):
        key, eq, value = word.partition("=")
        assert eq, f"line {inst.line}: ENV {inst.args!r} is not in KEY=VALUE form"
        pairs[key] = value
    return pairs


def pip_installs(inst: Instruction) -> list[list[str]]:
    """The arguments (options dropped) of each `pip install` in a RUN."""
    if inst.keyword != "RUN":
        return []
    lexer = shlex.shlex(inst.args, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands = [[]]
    for token in lexer:
        if token in ("&&", "||", ";", "|", "&"):
            commands.append([])
        else:
            commands[-1].append(token)
    found = []
    for words in commands:
        for i in range(len(words) - 1):
            if words[i].endswith("pip") and words[i + 1] == "install":
                found.append(words[i + 2 :])
    return found


def wheel_install(args: list[str]):
    """(wheel directory, extras) of the kfstack wheel among pip install args, or None."""
    for arg in args:
        expr = WHEEL_EXPR_RE.match(arg)
        match = WHEEL_RE.match(expr.group("glob") if expr else arg)
        if match:
            extras = ((expr or match).group("extras") or "").replace(" ", "")
            return match.group("path").rstrip("/"), set(filter(None, extras.split(",")))
    return None


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return parse_dockerfile(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def extras() -> dict[str, list[str]]:
    with open(REPO_ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["optional-dependencies"]


def role_install(dockerfile: Dockerfile, role: str) -> tuple[Instruction, str, set[str], list[str]]:
    """The one RUN that pip-installs the kfstack wheel into the role's image: the instruction, the
    wheel directory, the extras and the other requirements."""
    found = []
    for inst in dockerfile.image_instructions(role):
        for args in pip_installs(inst):
            wheel = wheel_install(args)
            if wheel:
                # Options dropped, with the value of the one that takes one (-c, the lock).
                values = {args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-c", "--constraint")}
                others = [
                    a
                    for a in args
                    if not a.startswith("-") and a not in values and wheel_install([a]) is None
                ]
                found.append((inst, wheel[0], wheel[1], others))
    assert len(found) == 1, f"{role}: {len(found)} installs of the kfstack wheel"
    return found[0]


# --- the parser itself --------------------------------------------------------------------------


def test_the_parser_reads_continuations_comments_args_stages_and_flags():
    parsed = parse_dockerfile(
        "# syntax=example/frontend:1\n"
        "# a comment, not a directive\n"
        "ARG BASE=python:3.11\n"
        "ARG NODEFAULT\n"
        "\n"
        "FROM ${BASE} AS Build\n"
        "RUN echo one \\\n"
        "# dropped inside the continuation\n"
        "    && echo two\n"
        "# says what the next stage is\n"
        "FROM build AS final\n"
        "COPY --from=build --chown=1000 /a /b\n"
        'ENTRYPOINT ["x", "y"]\n'
    )
    assert parsed.directives == {"syntax": "example/frontend:1"}
    assert parsed.global_args == {"BASE": "python:3.11", "NODEFAULT": None}
    assert [(s.base, s.name) for s in parsed.stages] == [("${BASE}", "build"), ("build", "final")]
    (run,) = parsed.stage("build").instructions
    assert run.args == "echo one && echo two" and run.line == 7
    assert parsed.stage("final").from_line.comments == ["says what the next stage is"]
    copy, entrypoint = parsed.stage("final").instructions
    assert copy.flag("from") == ["build"] and copy.flag("chown") == ["1000"] and copy.args == "/a /b"
    assert entrypoint.json_or_shell() == ["x", "y"]
    assert [s.name for s in parsed.chain("final")] == ["final", "build"]
    with pytest.raises(AssertionError):
        parse_dockerfile("RUN true\nFROM x\n")
    with pytest.raises(AssertionError):
        parse_dockerfile("FROM x\nRUN a \\\n")


def test_the_install_and_host_helpers_see_what_they_look_for():
    run = (
        parse_dockerfile(
            "FROM x\nRUN --mount=type=bind,from=wheel,source=/w,target=/w \\\n"
            '    true && /v/bin/pip install --no-cache-dir "$(ls /w/kfstack-*.whl)[a,b]" "t[x]==1"\n'
        )
        .stages[0]
        .instructions[0]
    )
    assert mount_options(run) == [{"type": "bind", "from": "wheel", "source": "/w", "target": "/w"}]
    (args,) = pip_installs(run)
    assert wheel_install(args) == ("/w", {"a", "b"})
    assert wheel_install(["/w/kfstack-*.whl"]) == ("/w", set())
    assert HOST_RE.search("FROM ghcr.io/kfstack/base:1") and HOST_RE.search("pip install -i https://x")
    assert not HOST_RE.search("COPY examples/kfstack_examples/digits/prepare.py /opt/team/jobs/x.py")


# --- images/Dockerfile --------------------------------------------------------------------------


def test_every_role_is_a_target_and_the_other_stages_are_the_shared_ones(dockerfile):
    names = [s.name for s in dockerfile.stages]
    assert None not in names and len(names) == len(set(names)), names
    assert set(images.ROLES) <= set(names)
    assert set(names) - set(images.ROLES) == {WHEEL_STAGE, RUNTIME_STAGE}
    assert not list(REPO_ROOT.glob("images/*/Dockerfile")), "per-role Dockerfiles are back"


def test_the_wheel_stage_builds_the_repository_wheel(dockerfile):
    stage = dockerfile.stage(WHEEL_STAGE)
    copied = {word for i in stage.instructions if i.keyword == "COPY" for word in i.args.split()[:-1]}
    setup = ast.parse((REPO_ROOT / "setup.py").read_text())
    (folders,) = [
        ast.literal_eval(node.value)
        for node in ast.walk(setup)
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "FOLDER_TO_PACKAGE"
    ]
    assert {"pyproject.toml", "setup.py", "README.md", *folders} <= copied
    (run,) = [i for i in stage.instructions if i.keyword == "RUN"]
    build, _, keep_lock = run.args.partition(" && ")
    words = shlex.split(build)
    assert words[:2] == ["pip", "wheel"] and "--no-deps" in words and words[-1] == "."
    assert words[words.index("--wheel-dir") + 1] == "/wheels"
    # Beside the wheel, the lock of the image's Python, for the roles to install with.
    assert "constraints" in copied
    assert shlex.split(keep_lock)[0] == "cp" and shlex.split(keep_lock)[-1] == LOCK_IN_WHEELS
    assert "constraints/py$(python -c" in keep_lock


@pytest.mark.parametrize("role", images.ROLES)
def test_every_role_installs_with_the_lock(dockerfile, role):
    inst, _, _, _ = role_install(dockerfile, role)
    (args,) = [a for a in pip_installs(inst) if wheel_install(a)]
    assert args[args.index("-c") + 1] == LOCK_IN_WHEELS
    assert (REPO_ROOT / "constraints" / "py3.11.txt").is_file()


def test_the_runtime_base_has_the_user_the_venv_and_the_environment(dockerfile):
    stage = dockerfile.stage(RUNTIME_STAGE)
    assert stage.base == "${PYTHON_IMAGE}"
    runs = " && ".join(i.args for i in stage.instructions if i.keyword == "RUN")
    assert re.search(r"\buseradd --uid 1000\b", runs)
    assert f"python -m venv {VENV}" in runs
    env = {k: v for i in stage.instructions if i.keyword == "ENV" for k, v in env_pairs(i).items()}
    assert env["PATH"].startswith(f"{VENV}/bin:") and env["PATH"].endswith("$PATH")
    assert env["HOME"] == "/tmp" and env["PYTHONUNBUFFERED"] == "1" and env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert stage.instructions[-1].keyword == "USER" and stage.instructions[-1].args == "1000"
    assert not [i for i in stage.instructions if i.keyword in ("ENTRYPOINT", "CMD")]


@pytest.mark.parametrize("role", images.ROLES)
def test_every_role_extends_the_shared_runtime_base(dockerfile, role):
    # Spark too: its JVM comes from Debian's packages on the same python image (see its comment).
    chain = [s.name for s in dockerfile.chain(role)]
    assert chain == [role, RUNTIME_STAGE], chain
    assert dockerfile.chain(role)[-1].base == "${PYTHON_IMAGE}"


@pytest.mark.parametrize("role", images.ROLES)
def test_every_role_installs_the_wheel_from_the_wheel_stage(dockerfile, role):
    inst, wheel_dir, _, _ = role_install(dockerfile, role)
    assert inst.args.startswith(f"{VENV}/bin/pip install"), inst.args
    (run,) = [i for i in dockerfile.stage(WHEEL_STAGE).instructions if i.keyword == "RUN"]
    built = shlex.split(run.args)[shlex.split(run.args).index("--wheel-dir") + 1]
    mounted = [m for m in mount_options(inst) if m.get("from") == WHEEL_STAGE]
    copied = [
        i
        for i in dockerfile.image_instructions(role)
        if i.keyword == "COPY" and i.flag("from") == [WHEEL_STAGE]
    ]
    assert any(
        (m.get("type"), m.get("source"), m.get("target")) == ("bind", built, wheel_dir) for m in mounted
    ) or any(i.args.split() == [built, wheel_dir] for i in copied), (
        f"{role}: the wheel in {wheel_dir} does not come from the {WHEEL_STAGE!r} stage"
    )


@pytest.mark.parametrize("role", images.ROLES)
def test_each_role_installs_its_own_extras_and_no_other_framework(dockerfile, extras, role):
    _, _, wheel_extras, others = role_install(dockerfile, role)
    assert wheel_extras == ROLE_EXTRAS[role]
    assert wheel_extras <= set(extras)
    names = {REQUIREMENT_RE.match(o).group("name").lower() for o in others}
    assert names == ROLE_EXTRA_REQUIREMENTS.get(role, set())
    frameworks = {FRAMEWORK_OF[x] for x in wheel_extras | names if x in FRAMEWORK_OF}
    assert frameworks == ROLE_FRAMEWORK[role]


def test_the_tf_trainer_installs_the_gpu_build_at_the_locks_release(dockerfile, extras):
    """tensorflow[and-cuda], unversioned: the lock holds it at the release of the tensorflow-cpu
    the tests run, and the tensorflow extra's range admits it."""
    _, _, _, others = role_install(dockerfile, "tf-trainer")
    assert others == ["tensorflow[and-cuda]"]
    lock = (REPO_ROOT / "constraints" / "py3.11.txt").read_text().splitlines()
    (cpu,) = [line for line in lock if line.lower().replace("_", "-").startswith("tensorflow-cpu==")]
    assert f"tensorflow=={cpu.split('==')[1]}" in lock


@pytest.mark.parametrize("role", images.ROLES)
def test_every_role_ends_as_uid_1000(dockerfile, role):
    users = [i.args for i in dockerfile.image_instructions(role) if i.keyword == "USER"]
    assert users and users[-1] == "1000", users
    assert dockerfile.stage(role).instructions[-1].keyword in ("USER", "ENTRYPOINT", "CMD", "EXPOSE")


@pytest.mark.parametrize("role", images.ROLES)
def test_every_role_keeps_its_entrypoint_and_sets_no_cmd(dockerfile, role):
    instructions = dockerfile.image_instructions(role)
    entrypoints = [i.json_or_shell() for i in instructions if i.keyword == "ENTRYPOINT"]
    assert (entrypoints[-1] if entrypoints else None) == ROLE_ENTRYPOINT[role]
    assert not [i for i in instructions if i.keyword == "CMD"]


def test_the_spark_target_runs_the_entrypoint_script_and_carries_the_job(dockerfile):
    instructions = dockerfile.image_instructions("spark")
    copies = dict(i.args.split() for i in instructions if i.keyword == "COPY" and not i.flags)
    (entrypoint,) = [i.json_or_shell() for i in instructions if i.keyword == "ENTRYPOINT"]
    assert entrypoint[-1] == copies[SPARK_ENTRYPOINT_SCRIPT]
    script = REPO_ROOT / SPARK_ENTRYPOINT_SCRIPT
    assert os.access(script, os.X_OK) and script.read_text().startswith("#!/bin/bash")
    # Every Spark application (the flights feature job too) runs through the driver wrapper.
    assert copies["kfstack/spark/driver.py"] == images.SPARK_DRIVER_FILE.removeprefix("local://")
    env = {k: v for i in instructions if i.keyword == "ENV" for k, v in env_pairs(i).items()}
    assert env["SPARK_HOME"] == "/opt/spark" and env["PYSPARK_PYTHON"] == f"{VENV}/bin/python"
    assert "/opt/spark/bin" in env["PATH"].split(":")
    runs = " ".join(i.args for i in instructions if i.keyword == "RUN")
    assert "openjdk-17-jre-headless" in runs and "tini" in runs and "/opt/spark" in runs


def test_every_copy_from_the_build_context_exists(dockerfile):
    for stage in dockerfile.stages:
        for inst in stage.instructions:
            if inst.keyword in ("COPY", "ADD") and not inst.flag("from"):
                for source in inst.args.split()[:-1]:
                    assert (REPO_ROOT / source).exists(), f"line {inst.line}: no {source} in the repository"


def test_no_registry_or_host_is_hard_coded_outside_the_base_image_args(dockerfile):
    stage_names = {s.name for s in dockerfile.stages}
    assert set(dockerfile.global_args) <= BASE_IMAGE_ARGS
    for stage in dockerfile.stages:
        base = re.fullmatch(r"\$\{(\w+)\}", stage.base)
        assert stage.base.lower() in stage_names or (base and base.group(1) in dockerfile.global_args), (
            f"line {stage.from_line.line}: FROM {stage.base} is neither a stage nor a base image ARG"
        )
        for inst in stage.instructions:
            text = " ".join([*(f"--{k}={v}" for k, v in inst.flags), inst.args])
            assert not HOST_RE.search(text), f"line {inst.line}: {inst.keyword} {text}"
            for args in pip_installs(inst):
                assert not {"-i", "--index-url", "--extra-index-url", "--trusted-host", "-f"} & set(args)


# --- images a team builds on kfstack's: the examples', and those kfstack init writes ------------


def check_built_on_kfstack(text: str, base: str, source: str) -> None:
    """One stage FROM kfstack's image of a role (registry and version ARGs defaulting to kfstack's
    own), root only to pip-install the package mounted from ``source`` into kfstack's venv, then
    the role's user again, with the role's own entrypoint."""
    parsed = parse_dockerfile(text)
    (stage,) = parsed.stages
    assert stage.base == base
    assert parsed.global_args["KFSTACK_REGISTRY"] == images.DEFAULT_REGISTRY
    assert parsed.global_args["KFSTACK_VERSION"] == images.__version__
    installs = [args for inst in stage.instructions for args in pip_installs(inst)]
    assert installs == [["--no-cache-dir", source]]
    (run,) = [i for i in stage.instructions if i.keyword == "RUN"]
    mounted = [m for m in mount_options(run) if m.get("type") == "bind" and m.get("target") == source]
    assert len(mounted) == 1 and "rw" in mounted[0], mount_options(run)
    assert run.args.startswith(f"{VENV}/bin/pip install")
    users = [i.args for i in stage.instructions if i.keyword == "USER"]
    assert users == ["root", "1000"]
    assert not [i for i in stage.instructions if i.keyword in ("ENTRYPOINT", "CMD")]


def test_the_examples_images_add_the_examples_package_on_top_of_each_role():
    text = (REPO_ROOT / "examples" / "Dockerfile").read_text()
    check_built_on_kfstack(text, "${KFSTACK_REGISTRY}/kfstack-${ROLE}:${KFSTACK_VERSION}", "/src/examples")
    assert parse_dockerfile(text).global_args["ROLE"] in images.ROLES


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_the_images_kfstack_init_writes_build_on_kfstacks_of_their_role(framework):
    from kfstack.app import project

    values = project.plan("unused", "demo", framework, "binary", None).values()
    roles = {"launcher": "launcher", "spark": "spark", "trainer": values["trainer_role"]}
    for name, role in roles.items():
        template = project.TEMPLATE / "images" / f"{name}.Dockerfile.tmpl"
        text = project.fill(template.read_text(), values, template.name)
        assert role in images.ROLES
        check_built_on_kfstack(text, f"${{KFSTACK_REGISTRY}}/kfstack-{role}:${{KFSTACK_VERSION}}", "/src")
