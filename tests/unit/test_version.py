"""The pipeline version: <version>+<git short sha>[-dirty] of the source tree, or explicit; and
its form where + is not allowed."""

from __future__ import annotations

import os
import subprocess

import pytest

from kfstack import version
from kfstack.version import VERSION_ENV, __version__, check_version, label_safe, pipeline_version


def git(root, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def test_a_checkout_gives_the_short_sha_and_dirty_when_changed(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git(tmp_path, "add", "a.py")
    git(tmp_path, "commit", "-qm", "first")
    sha = git(tmp_path, "rev-parse", "--short", "HEAD")
    version._source_version.cache_clear()
    assert version._source_version(str(tmp_path)) == f"{__version__}+{sha}"
    (tmp_path / "a.py").write_text("x = 2\n")
    version._source_version.cache_clear()
    assert version._source_version(str(tmp_path)) == f"{__version__}+{sha}-dirty"
    version._source_version.cache_clear()


def test_no_checkout_gives_the_package_version(tmp_path):
    version._source_version.cache_clear()
    assert version._source_version(str(tmp_path)) == __version__
    version._source_version.cache_clear()


def test_explicit_or_env_versions_win_and_are_checked(monkeypatch):
    monkeypatch.setenv(VERSION_ENV, "2.0.0+ci7")
    assert pipeline_version() == "2.0.0+ci7"
    assert pipeline_version("3.1.4") == "3.1.4"
    monkeypatch.delenv(VERSION_ENV)
    assert pipeline_version().startswith(__version__)
    for bad in ("1.0 beta", "-1.0", "1.0+", "x" * 64):
        with pytest.raises(ValueError, match="letters, digits"):
            check_version(bad)


def test_label_safe_replaces_the_plus_only():
    assert label_safe("0.1.0+abc1234-dirty") == "0.1.0-abc1234-dirty"
    assert label_safe("0.1.0") == "0.1.0"
