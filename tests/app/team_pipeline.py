"""A team's pipeline as small as one gets, for the commands that take any pipeline (no
``from __future__ import annotations`` here: kfp reads the annotations as types)."""

from kfp import dsl


@dsl.component(base_image="python:3.11")
def hello(who: str) -> str:
    return who


@dsl.pipeline(name="team-hello")
def team_hello(who: str = "team", platform: str = "kubernetes"):
    hello(who=who)
