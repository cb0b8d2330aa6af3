"""Pipelines from any installed package: the ``kfstack.pipelines`` entry-point group, read from
the packages' metadata (nothing imported to list them), a team's pipeline used exactly as the
built-in ones, and a clash or a broken registration named in one line without hiding the rest.

The "installed packages" are ``*.dist-info`` folders on ``sys.path``, which is what
``importlib.metadata`` reads for a wheel installed into a venv.
"""

from __future__ import annotations

import importlib.metadata
import textwrap

import pytest

from kfstack.app import cli
from kfstack.errors import UsageError
from kfstack.pipelines import chosen, entry, load_pipeline, pipeline_names, run_check
from tests.installed import install_metadata

TEAM_PIPELINE = """
    from kfp import dsl

    from kfstack.pipelines import PipelineEntry


    @dsl.component(base_image="python:3.11")
    def hello(who: str) -> str:
        return f"hello {who}"


    @dsl.pipeline(name="team-hello")
    def team_hello(who: str = "team"):
        hello(who=who)


    def check(parameters):
        if parameters.get("who") == "nobody":
            raise ValueError("who=nobody greets no one")


    REGISTRATION = PipelineEntry(
        function="team_pipelines.hello:team_hello", check="team_pipelines.hello:check"
    )
    NOT_A_REGISTRATION = "team_pipelines.hello:team_hello"
"""


def install(site, package: str, entry_points: dict[str, str]) -> None:
    """``package`` installed, declaring ``entry_points`` as pipelines."""
    install_metadata(site, package, {"kfstack.pipelines": entry_points})


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A site folder on the path holding the team's module (installed packages go here)."""
    site = tmp_path / "site"
    (site / "team_pipelines").mkdir(parents=True)
    (site / "team_pipelines" / "__init__.py").write_text("")
    (site / "team_pipelines" / "hello.py").write_text(textwrap.dedent(TEAM_PIPELINE))
    monkeypatch.syspath_prepend(str(site))
    return site


def test_a_teams_package_registers_its_pipeline_as_the_built_in_ones_are(site, capsys):
    install(site, "team-pipelines", {"team-hello": "team_pipelines.hello:REGISTRATION"})
    assert {"team-hello", "flights-training", "digits-training"} <= set(pipeline_names())
    assert load_pipeline("team-hello").name == "team-hello"
    with pytest.raises(ValueError, match="greets no one"):
        run_check("team-hello")({"who": "nobody"})
    assert cli.main(["list"]) == 0
    assert "team-hello" in capsys.readouterr().out.split()
    # Named directly as module:function, with no registration at all.
    assert load_pipeline("team_pipelines.hello:team_hello").name == "team-hello"


def test_listing_imports_nothing_and_a_broken_registration_hides_no_other(site):
    install(site, "team-broken", {"team-broken": "team_pipelines.missing:REGISTRATION"})
    install(site, "team-typo", {"team-typo": "team_pipelines.hello:NOT_A_REGISTRATION"})
    assert {"team-broken", "team-typo", "flights-training"} <= set(pipeline_names())
    with pytest.raises(
        UsageError, match=r"pipeline 'team-broken' of team-broken: .* fails to load: ModuleNotFound"
    ):
        entry("team-broken")
    with pytest.raises(UsageError, match=r"is a str, not a kfstack.pipelines.PipelineEntry"):
        entry("team-typo")
    assert entry("flights-training").check == "kfstack_examples.flights.pipelines.steps:check_run"


def test_a_name_two_packages_declare_is_refused_naming_both(site):
    install(site, "team-a", {"hello": "team_pipelines.hello:REGISTRATION"})
    install(site, "team-b", {"hello": "team_pipelines.hello:REGISTRATION"})
    with pytest.raises(UsageError, match=r"pipeline 'hello' is declared by team-a .* and team-b"):
        entry("hello")
    assert entry("digits-training").function.endswith("digits_training")


def test_an_unknown_name_lists_the_known_ones_and_a_module_that_fails_is_named(site):
    with pytest.raises(UsageError, match=r"unknown pipeline 'nope'; known: .*flights-training"):
        entry("nope")
    with pytest.raises(UsageError, match=r"pipeline 'team_pipelines.absent:f': .* ModuleNotFoundError"):
        load_pipeline("team_pipelines.absent:f")


def test_without_a_name_the_one_installed_pipeline_is_used_and_several_must_be_named(
    site, monkeypatch, capsys
):
    # Here kfstack and its examples are installed: three pipelines, so a name is needed.
    with pytest.raises(
        UsageError, match=r"name the pipeline: installed are .*digits-training.*flights-training"
    ):
        chosen(None)
    assert chosen("digits-training") == "digits-training"
    # A team's venv with only its own package: the one pipeline it declares is the default.
    install(site, "team-pipelines", {"team-hello": "team_pipelines.hello:REGISTRATION"})

    def only_the_team(group):
        found = importlib.metadata.distributions(path=[str(site)])
        return [point for dist in found for point in dist.entry_points if point.group == group]

    monkeypatch.setattr(importlib.metadata, "entry_points", only_the_team)
    assert chosen(None) == "team-hello"
    assert cli.main(["describe"]) == 0
    assert capsys.readouterr().out.startswith("team-hello\n")
    (site / "team_pipelines-1.0.dist-info" / "entry_points.txt").unlink()
    with pytest.raises(UsageError, match=r"no pipeline is installed: install a package that declares one"):
        chosen(None)


def _project(root, package: str = "churn"):
    """What ``kfstack init churn`` makes under ``root``: ``churn/`` (the project) holding the
    package ``churn/``, installed as an editable install puts it on the path."""
    source = root / package / package
    source.mkdir(parents=True)
    (source / "__init__.py").write_text("")
    (source / "pipeline.py").write_text("def churn_training():\n    return 'ran'\n")
    return root / package


def test_a_folder_that_shadows_the_package_is_refused_before_loading(tmp_path, monkeypatch):
    """From the folder above a project, the project's folder has the package's name: the run's
    processes (which start there) would import it instead of the package. Said before anything
    is loaded, with what to do."""
    project = _project(tmp_path)
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as refused:
        load_pipeline("churn.pipeline:churn_training")
    message = str(refused.value)
    assert "the working directory has a folder churn/ that is not the package churn" in message
    assert "Run kfstack from inside the project (cd churn) or from another directory" in message
    # From inside the project, or anywhere else, the same pipeline loads.
    for where in (project, project.parent.parent):
        monkeypatch.chdir(where)
        assert load_pipeline("churn.pipeline:churn_training")() == "ran"
