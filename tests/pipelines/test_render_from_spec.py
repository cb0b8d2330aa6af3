"""Render follows the compiled pipeline's own wiring: a new launching component needs no change
to the render code, conditions on parameters are decided, conditions on task outputs are not."""

import textwrap

import pytest

from kfstack import pipeline_spec
from kfstack.pipelines import rendering
from kfstack.settings import Placeholder
from tests.installed import install_metadata

WIDGET_COMPONENT = '''
from kfp import dsl
from kfp.dsl import Artifact, Output


@dsl.component(base_image="python:3.11", install_kfp_package=False)
def widget(platform: str, size: int, run_id: str, task_name: str, receipt: Output[Artifact]):
    """A launching component nothing in kfstack knows about."""


@dsl.component(base_image="python:3.11", install_kfp_package=False)
def choose(mode: str) -> str:
    return mode
'''

WIDGET_STAGE = """
import dataclasses

from kfstack.kubernetes.placement import Placement
from kfstack.platforms import Variant
from kfstack.settings import Settings, setting


@dataclasses.dataclass(frozen=True)
class WidgetSettings(Settings):
    size: int = setting(1, ge=1)
    receipt: str = ""

    @property
    def placement(self):
        return Placement()


class WidgetStage:
    component = "widget"
    reference_output = "receipt"

    def settings(self, arguments):
        return WidgetSettings.from_arguments(arguments)

    def variants(self, settings):
        return [Variant(settings, ())]

    def preflight(self, settings):
        pass

    def build(self, settings, context):
        return [{"apiVersion": "example.kfstack.dev/v1", "kind": "Widget",
                 "metadata": {"name": context.name("widget"), "labels": context.labels()},
                 "spec": {"size": settings.size, "receipt": settings.receipt}}]

    def run_local(self, settings):
        raise NotImplementedError

    def collect(self, settings, finished):
        raise NotImplementedError


STAGE = WidgetStage()
"""

WIDGET_PIPELINE = """
from kfp import dsl

from extra_components.widget.component import choose, widget

RUN_ID = dsl.PIPELINE_JOB_ID_PLACEHOLDER
TASK = dsl.PIPELINE_TASK_NAME_PLACEHOLDER


@dsl.pipeline(name="widgets")
def widgets(size: int = 2, mode: str = "small"):
    with dsl.If(mode == "small", name="small"):
        widget(platform="kubernetes", size=size, run_id=RUN_ID, task_name=TASK)
    with dsl.Else(name="large"):
        widget(platform="kubernetes", size=10, run_id=RUN_ID, task_name=TASK)
    chosen = choose(mode=mode)
    with dsl.If(chosen.output == "yes", name="on-output"):
        widget(platform="kubernetes", size=size, run_id=RUN_ID, task_name=TASK)
"""


@pytest.fixture
def widget_pipeline(tmp_path, monkeypatch):
    """A pipeline and a launching component written from scratch, outside the project."""
    package = tmp_path / "extra_components" / "widget"
    package.mkdir(parents=True)
    (tmp_path / "extra_components" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "component.py").write_text(textwrap.dedent(WIDGET_COMPONENT))
    (package / "stage.py").write_text(textwrap.dedent(WIDGET_STAGE))
    (tmp_path / "extra_pipeline.py").write_text(textwrap.dedent(WIDGET_PIPELINE))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "extra_pipeline:widgets"  # named as module:function, as on the command line


def test_a_new_launching_component_is_rendered_with_no_change_to_render(widget_pipeline):
    rendered = rendering.render(
        widget_pipeline, {"size": "3"}, run_id="r-1", components_packages=("extra_components",)
    )
    by_condition = {task.when: task for task in rendered}
    # mode=small (the default) decides the If/Else pair: only the If branch is rendered.
    decided = by_condition[()]
    (obj,) = decided.objects
    assert obj["kind"] == "Widget" and obj["spec"]["size"] == 3
    assert obj["metadata"]["labels"]["kfstack.dev/pipeline-run"] == "r-1"
    # The task's own output artifact is a marked placeholder (the backend picks its URI).
    assert obj["spec"]["receipt"] == "{{artifact:" + decided.task + "/receipt}}"
    # The branch on a task's output cannot be decided before the run: rendered, and marked.
    (undecided,) = [task for task in rendered if task.when]
    assert "pipelinechannel--choose-Output" in undecided.when[0]
    assert len(rendered) == 2


def test_the_else_branch_is_rendered_when_the_parameter_says_so(widget_pipeline):
    rendered = rendering.render(
        widget_pipeline, {"mode": "large"}, run_id="r-1", components_packages=("extra_components",)
    )
    sizes = sorted(task.objects[0]["spec"]["size"] for task in rendered)
    assert sizes == [2, 10]  # the Else branch (10) and the undecided output branch (size=2)


def test_a_stage_refuses_a_bad_value_before_rendering(widget_pipeline):
    with pytest.raises(ValueError, match="size=0 must be >= 1"):
        rendering.render(
            widget_pipeline, {"size": 0}, run_id="r-1", components_packages=("extra_components",)
        )


@pytest.mark.parametrize(
    ("condition", "inputs", "expected"),
    [
        (
            "inputs.parameter_values['pipelinechannel--f'] == 'pytorch'",
            {"pipelinechannel--f": "pytorch"},
            True,
        ),
        (
            "!(inputs.parameter_values['pipelinechannel--f'] == 'pytorch')",
            {"pipelinechannel--f": "pytorch"},
            False,
        ),
        (
            "int(inputs.parameter_values['pipelinechannel--n']) > 3 && "
            "inputs.parameter_values['pipelinechannel--f'] != 'x'",
            {"pipelinechannel--n": "4", "pipelinechannel--f": "y"},
            True,
        ),
    ],
)
def test_conditions_are_evaluated_on_parameters(condition, inputs, expected):
    assert pipeline_spec.evaluate_condition(condition, inputs) is expected


def test_a_condition_on_a_placeholder_is_undecided():
    with pytest.raises(pipeline_spec.UndecidedCondition):
        pipeline_spec.evaluate_condition(
            "inputs.parameter_values['x'] == 'a'", {"x": Placeholder("{{output:t/o}}")}
        )


# A team's launching component named as kfstack's own (distributed_training), declared by its
# package in the kfstack.stages entry-point group.
TEAM_PIPELINE = """
from kfp import dsl

from team_components.distributed_training.component import distributed_training

RUN_ID = dsl.PIPELINE_JOB_ID_PLACEHOLDER
TASK = dsl.PIPELINE_TASK_NAME_PLACEHOLDER


@dsl.pipeline(name="team-training")
def team_training(size: int = 4):
    distributed_training(platform="kubernetes", size=size, run_id=RUN_ID, task_name=TASK)
"""


def _declare_stages(site, package: str, entry_points: dict[str, str]) -> None:
    """``package`` installed, declaring ``entry_points`` as launching stages."""
    install_metadata(site, package, {"kfstack.stages": entry_points})


@pytest.fixture
def team_pipeline(tmp_path, monkeypatch):
    package = tmp_path / "team_components" / "distributed_training"
    package.mkdir(parents=True)
    (tmp_path / "team_components" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    source = textwrap.dedent(WIDGET_COMPONENT).replace("def widget(", "def distributed_training(")
    (package / "component.py").write_text(source)
    stage = textwrap.dedent(WIDGET_STAGE).replace(
        'component = "widget"', 'component = "distributed-training"'
    )
    (package / "stage.py").write_text(stage)
    (tmp_path / "team_training.py").write_text(textwrap.dedent(TEAM_PIPELINE))
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_teams_launching_component_is_found_by_its_package_and_never_taken_for_kfstacks(team_pipeline):
    from kfstack.components import launching_stages

    # Undeclared, the team's task is nobody's: its name alone matches kfstack's component.
    assert rendering.render("team_training:team_training", {}, run_id="r-1") == []
    _declare_stages(
        team_pipeline, "team-components", {"train": "team_components.distributed_training.stage:STAGE"}
    )
    stages = launching_stages()
    team_key = "team_components.distributed_training.component:distributed_training"
    kfstack_key = "kfstack.components.training.distributed_training.component:distributed_training"
    assert stages[team_key].component == stages[kfstack_key].component == "distributed-training"
    (task,) = rendering.render("team_training:team_training", {"size": 5}, run_id="r-1")
    assert task.component == team_key
    assert [obj["kind"] for obj in task.objects] == ["Widget"] and task.objects[0]["spec"]["size"] == 5
    # kfstack's own pipelines still find kfstack's stage beside the team's.
    found = {t.component for t in rendering.render("digits-training", {}, run_id="r-1")}
    assert kfstack_key in found and team_key not in found


def test_a_broken_declared_stage_is_left_out_naming_its_package_and_hides_no_other(team_pipeline, caplog):
    _declare_stages(
        team_pipeline,
        "team-broken",
        {
            "train": "team_components.absent.stage:STAGE",
            "loose": "team_components.distributed_training.component:distributed_training",
        },
    )
    _declare_stages(
        team_pipeline, "team-components", {"train": "team_components.distributed_training.stage:STAGE"}
    )
    (task,) = rendering.render("team_training:team_training", {}, run_id="r-1")
    assert task.objects[0]["kind"] == "Widget"
    warned = " | ".join(record.getMessage() for record in caplog.records)
    assert "launching component 'train' of team-broken" in warned and "ModuleNotFoundError" in warned
    assert "'loose' of team-broken" in warned and "name a stage module's STAGE" in warned


def test_containerized_components_of_one_name_are_told_apart_by_image_and_arguments():
    from kfstack.pipeline_spec import executor_identity

    # What kfp compiles for any target_image component: the same command, the function in the args.
    command = ["python3", "-m", "kfp.dsl.executor_main"]
    ours = executor_identity("registry/a:1", command, ["--function_to_execute", "train"])
    assert ours == executor_identity("registry/a:1", command, ["--function_to_execute", "train"])
    assert ours != executor_identity("registry/b:1", command, ["--function_to_execute", "train"])
    assert ours != executor_identity("registry/a:1", command, ["--function_to_execute", "score"])
