"""The MLflow UI on the embedded store, in a real browser (Debian's chromium, driven by Selenium
through chromium-driver): after two digits runs, `kfstack ui` lists both with their accuracy, a
run's tuning task shows its trials nested under it, and the two runs compare side by side."""

import io
import json
import os
import re
import subprocess
import sys
import urllib.parse

import pytest

from kfstack.app.local_run import run_pipeline_locally
from tests.debian_tools import debian_tool

pytestmark = pytest.mark.slow

ACCURACY = "evaluation_metrics.accuracy"
WAIT_SECONDS = 60


@pytest.fixture(scope="module")
def two_digits_runs(tmp_path_factory):
    """Two tracked digits runs under one root (the second runs every step again)."""
    root = tmp_path_factory.mktemp("runs")
    saved = {name: os.environ.pop(name, None) for name in ("KFSTACK_TRACKING", "MLFLOW_TRACKING_URI")}
    try:
        summaries = [
            run_pipeline_locally(
                "digits-training", {"platform": "local"}, str(root), console_stream=io.StringIO(), cache=cache
            )
            for cache in (True, False)
        ]
    finally:
        os.environ.update({name: value for name, value in saved.items() if value is not None})
    for summary in summaries:
        assert summary.status == "SUCCEEDED", summary.error
        assert "error" not in summary.tracking, summary.tracking
    return root, summaries


@pytest.fixture(scope="module")
def ui(two_digits_runs):
    """`kfstack ui` on the runs' root, as a person starts it."""
    root, _ = two_digits_runs
    process = subprocess.Popen(
        [sys.executable, "-m", "kfstack.app.cli", "ui", "--pipeline-root", str(root), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    announced = ""
    for line in process.stdout:
        if line.startswith("MLflow UI on "):
            announced = line
            break
    found = re.search(r"http://127\.0\.0\.1:\d+", announced)
    assert found, f"kfstack ui did not announce its address: {announced!r}"
    yield found.group(0)
    process.terminate()
    process.wait(30)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = debian_tool("chromium")
    for flag in (
        "--headless=new",
        "--no-sandbox",  # root, in a container
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1600,1200",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=debian_tool("chromedriver")), options=options)
    yield driver
    driver.quit()


def page_text(browser, url, *expected):
    """The page's text once every one of ``expected`` shows (the UI renders after it loads)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url)

    def shown(driver):
        text = driver.find_element(By.TAG_NAME, "body").text
        return text if all(item in text for item in expected) else False

    try:
        return WebDriverWait(browser, WAIT_SECONDS).until(shown)
    except Exception:
        text = browser.find_element(By.TAG_NAME, "body").text
        raise AssertionError(f"{url}: {expected} not all shown; the page shows:\n{text[:3000]}") from None


def test_the_ui_lists_both_runs_with_their_accuracy_nests_the_trials_and_compares_them(
    two_digits_runs, ui, browser
):
    _, summaries = two_digits_runs
    experiment = summaries[0].tracking["experiment"]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=ui)
    experiment_id = client.get_experiment_by_name(experiment).experiment_id
    names = [os.path.basename(summary.run_dir) for summary in summaries]
    parents = [summary.tracking["run_id"] for summary in summaries]

    # The experiment's page lists both pipeline runs.
    page_text(browser, f"{ui}/#/experiments/{experiment_id}/runs", *names)

    # Each run's page shows its accuracy, the figure its summary printed.
    for parent, summary in zip(parents, summaries, strict=True):
        text = page_text(browser, f"{ui}/#/experiments/{experiment_id}/runs/{parent}", ACCURACY)
        assert f"{ACCURACY}\n{summary.metrics[ACCURACY]}" in text

    # The first run's tuning task lists its trials as child runs; a trial's page names its parent.
    tuning = client.search_runs(
        [experiment_id],
        f"tags.`mlflow.parentRunId` = '{parents[0]}' and tags.`kfstack.task` = 'hyperparameter-tuning'",
    )[0]
    trials = client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{tuning.info.run_id}'")
    assert len(trials) == summaries[0].tuning["trials_run"]
    trial_names = sorted(trial.info.run_name for trial in trials)
    page_text(
        browser, f"{ui}/#/experiments/{experiment_id}/runs/{tuning.info.run_id}", "Child runs", *trial_names
    )
    trial = trials[0]
    text = page_text(
        browser,
        f"{ui}/#/experiments/{experiment_id}/runs/{trial.info.run_id}",
        "Parent run",
        "hyperparameter-tuning",
        "val_accuracy",
    )
    for name in trial.data.params:  # its assignments
        assert name in text

    # The two runs compared side by side: their parameters and their accuracies.
    query = urllib.parse.urlencode({"runs": json.dumps(parents), "experiments": json.dumps([experiment_id])})
    text = page_text(browser, f"{ui}/#/compare-runs?{query}", *names, "Parameters", ACCURACY)
    figures = text[text.index(ACCURACY) :]
    for summary in summaries:
        assert f"{summary.metrics[ACCURACY]:.3f}" in figures
