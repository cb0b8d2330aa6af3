"""Benchmark: from drift injected into live traffic to a started retraining run and to a retrained
model in production, embedded, every part real and on loopback.

    python -m benchmarks.drift_to_retraining [--pipeline-root DIR] [--for 1m] [--group-wait 30s]

The chain, each part the one that ships:

1. **A model in production.** ``kfstack run --local flights-retraining`` on the first window
   (2013-01-01 .. 2013-06-30, small settings: SMALL) trains and deploys the flights model first
   into the pipeline root's registry; ``--pipeline-root`` with a model already in production
   skips it. The registry's production model is served by the flights predictor
   (``python -m kfstack_examples.flights.predictor``, as the embedded rollout starts it) with
   ``--live_drift=on``.
2. **Prometheus** (Debian's 2.42) scrapes it every ``--scrape-interval``, with the static labels
   the PodMonitor's relabelling adds on a cluster (namespace, pod, inference_service), the
   shipped rule groups loaded (manifests/components/monitoring/prometheus-rule.yaml), and
   ``KfstackLiveDrift``'s ``for:`` the shipped one unless ``--for`` overrides it. It sends its
   alerts to **Alertmanager** (Debian's 0.25, no cluster port) configured with the shipped route
   and receiver (manifests/components/retraining-trigger/alertmanager.yml), the webhook pointed
   at **``kfstack alert-receiver --local --retrain flights-delay=flights-retraining``**, whose
   runs take RETRAINING's arguments.
3. **Traffic.** The production model's own held-out flights (the ``test_requests`` of the
   feature job of the run that trained it; shuffled) fill the window, and keep coming at
   ``--rows-per-second`` while Prometheus watches for ``--quiet`` seconds: KfstackLiveDrift must
   not even go pending (so no ``for:`` would let it fire). Then the same rows through the
   flights' ``synthetic_drift`` transform (share DRIFT_SHARE: later departures, longer routes)
   replace them, request after request.

From the first drifted request, seconds to (LINKS): the server's max PSI over the rule's line
(its ``/metrics``), the alert pending and firing in Prometheus, the run directory the receiver
creates, the receiver's ``started`` decision in its log, and the run's end with a new model in
production. Written to ``benchmarks/results/drift_to_retraining.json`` with the ``for:``,
the route's waits and the cooldown.

The retraining run reads a week-later window carrying the same synthetic drift: the data that
has come in since the traffic changed, on which the retrained model beats the champion at the
gate (tests/pipelines/test_flights_retraining_local.py shows that path). The live traffic is
the first window's held-out rows, not that later window: the champion's own distribution,
then the same rows shifted. Needs Debian's prometheus and prometheus-alertmanager.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import httpx
import numpy as np
import psutil
import yaml

from benchmarks.common import machine_facts, write_result
from kfstack.app import run_directory
from kfstack.app.cli.alert_receiver import parse_duration
from kfstack.serving import local_services
from kfstack.serving.registry import LocalRegistry, ProductionRecord
from kfstack_examples.flights.feature_spec import TEST_REQUESTS_FILE
from kfstack_examples.flights.predictor import DEFAULT_MODEL_NAME
from kfstack_examples.flights.predictor import command as predictor_command

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RULES_FILE = os.path.join(REPO_ROOT, "manifests", "components", "monitoring", "prometheus-rule.yaml")
ROUTE_FILE = os.path.join(REPO_ROOT, "manifests", "components", "retraining-trigger", "alertmanager.yml")
ALERT = "KfstackLiveDrift"
RETRAINING_RECEIVER = "kfstack-retraining"
PIPELINE = "flights-retraining"
SERVICE = DEFAULT_MODEL_NAME
# What the PodMonitor's relabelling adds to a stable predictor pod's series on a cluster.
TARGET_LABELS = {"namespace": "kfstack-bench", "pod": f"{SERVICE}-predictor-0", "inference_service": SERVICE}
BINARIES = {"prometheus": "prometheus", "prometheus-alertmanager": "prometheus-alertmanager"}
# The slow flights tests' settings (tests/pipelines/test_flights_retraining_local.py).
SMALL = {"sample_fraction": 0.2, "tune": False, "epochs": 2, "num_shards": 2, "canary_records": 1000}
FIRST_WINDOW = {"window_start": "2013-01-01", "window_end": "2013-06-30"}
DRIFT_SHARE = 0.3
# The retraining run's arguments: the week-later window, with the drift the traffic shows.
RETRAINING = {
    **SMALL,
    "window_start": "2013-01-08",
    "window_end": "2013-07-07",
    "synthetic_drift": DRIFT_SHARE,
}
DEFAULT_COOLDOWN = "6h"
POLL_SECONDS = 0.25
ROWS_PER_REQUEST = 10
_MAX_PSI = re.compile(r"^kfstack_predictor_drift_max_psi\{[^}]*\}\s+(\S+)$", re.MULTILINE)
_WINDOW_ROWS = re.compile(r"^kfstack_predictor_drift_window_rows\{[^}]*\}\s+(\S+)$", re.MULTILINE)
_THRESHOLD = re.compile(r">\s*([0-9.]+)\s*$")


class ChainError(RuntimeError):
    """A link of the chain did not happen in time (the message says which, with the logs' tails)."""


def binary(name: str) -> str | None:
    """Debian's ``name`` (package BINARIES[name]), or None when not installed."""
    return shutil.which(name) or (f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None)


# --- the shipped configuration ------------------------------------------------------------------


def shipped_rule_groups() -> list[dict[str, Any]]:
    """The PrometheusRule's spec.groups (a Prometheus rule file's content) as shipped."""
    with open(RULES_FILE, encoding="utf-8") as f:
        return yaml.safe_load(f)["spec"]["groups"]


def drift_rule(groups: list[dict[str, Any]]) -> dict[str, Any]:
    (rule,) = [rule for group in groups for rule in group["rules"] if rule.get("alert") == ALERT]
    return rule


def rule_groups(for_: str | None) -> list[dict[str, Any]]:
    """The shipped groups, KfstackLiveDrift's ``for:`` replaced by ``for_`` when given."""
    groups = shipped_rule_groups()
    if for_ is not None:
        drift_rule(groups)["for"] = for_
    return groups


def psi_line() -> float:
    """The PSI above which KfstackLiveDrift fires (its expression's comparison)."""
    match = _THRESHOLD.search(drift_rule(shipped_rule_groups())["expr"].strip())
    assert match, f"{ALERT}'s expression does not end in '> threshold'"
    return float(match.group(1))


def shipped_route() -> dict[str, Any]:
    with open(ROUTE_FILE, encoding="utf-8") as f:
        config = yaml.safe_load(f)
    return config


def retraining_route(config: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in config["route"]["routes"] if r["receiver"] == RETRAINING_RECEIVER)


def alertmanager_config(
    receiver_url: str, token_file: str, group_wait: str | None, group_interval: str | None
) -> dict[str, Any]:
    """The shipped route and receiver, the webhook at ``receiver_url`` with ``token_file``; the
    route's waits replaced where given."""
    config = shipped_route()
    route = retraining_route(config)
    if group_wait is not None:
        route["group_wait"] = group_wait
    if group_interval is not None:
        route["group_interval"] = group_interval
    (webhook,) = next(r for r in config["receivers"] if r["name"] == RETRAINING_RECEIVER)["webhook_configs"]
    webhook["url"] = f"{receiver_url}/alerts"
    webhook["http_config"]["authorization"]["credentials_file"] = token_file
    return config


def prometheus_config(target: str, alertmanager: str, interval_seconds: float) -> dict[str, Any]:
    # Prometheus durations are whole numbers of a unit (prometheus/common model.ParseDuration).
    interval = f"{round(interval_seconds * 1000)}ms"
    return {
        "global": {
            "scrape_interval": interval,
            "scrape_timeout": f"{round(min(10.0, 0.9 * interval_seconds) * 1000)}ms",
            "evaluation_interval": interval,
        },
        "rule_files": ["rules.yaml"],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]},
        "scrape_configs": [
            {
                "job_name": "kfstack-model-server",
                "static_configs": [{"targets": [target], "labels": TARGET_LABELS}],
            }
        ],
    }


# --- the model in production and its traffic ----------------------------------------------------


def production(pipeline_root: str) -> ProductionRecord | None:
    registry = os.path.join(pipeline_root, run_directory.REGISTRY_DIR)
    return LocalRegistry(registry, SERVICE).production()


def deploy_first_model(pipeline_root: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """``kfstack run --local flights-retraining`` on the first window; its summary.

    Raises:
        ChainError: The run failed (the tail of its console).
    """
    params = {**SMALL, **FIRST_WINDOW, **(arguments or {})}
    command = [sys.executable, "-m", "kfstack.app.cli", "run", "--local", PIPELINE]
    command += ["--pipeline-root", pipeline_root, *_params(params)]
    proc = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise ChainError(f"the first run failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    (run,) = run_directory.list_runs(pipeline_root)[-1:]
    with open(run.summary, encoding="utf-8") as f:
        return json.load(f)


def _params(arguments: dict[str, Any]) -> list[str]:
    return [f"--param={k}={json.dumps(v) if isinstance(v, bool) else v}" for k, v in arguments.items()]


def held_out_requests(pipeline_root: str, run_id: str) -> str:
    """The held-out requests of the run ``run_id`` (its directory's name): the production
    model's own held-out flights."""
    pattern = os.path.join(pipeline_root, run_id, "artifacts", "**", TEST_REQUESTS_FILE)
    found = glob.glob(pattern, recursive=True)
    if not found:
        raise ChainError(f"no {TEST_REQUESTS_FILE} under {os.path.join(pipeline_root, run_id)}")
    return max(found, key=os.path.getmtime)


def traffic_records(requests_file: str, share: float, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """The held-out flights as requests, shuffled: as they are, and through the synthetic drift."""
    from benchmarks.live_drift_false_alarms import drifted_records, held_out_records

    records = held_out_records(os.path.dirname(requests_file))
    order = np.random.default_rng(seed).permutation(len(records))
    shuffled = [records[i] for i in order]
    return shuffled, drifted_records(shuffled, share, seed=seed + 1)


class Traffic:
    """V1 requests of ``ROWS_PER_REQUEST`` records at ``rows_per_second``, cycling through the
    current records, in a thread; :meth:`switch` changes the records from the next request on."""

    def __init__(self, url: str, records: Sequence[dict], rows_per_second: float) -> None:
        self.url = url
        self.rows_per_second = rows_per_second
        self._records = records
        self._next: Sequence[dict] | None = None
        # time.time() of the first request of the records switched to.
        self.switched_at: float | None = None
        self.rows = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._send, name="traffic", daemon=True)

    def fill(self, rows: int) -> None:
        """``rows`` records at once, before the paced traffic (a window filled without waiting)."""
        with httpx.Client(timeout=30) as client:
            for start in range(0, rows, 500):
                self._post(
                    client,
                    [self._records[i % len(self._records)] for i in range(start, min(rows, start + 500))],
                )

    def start(self) -> None:
        self._thread.start()

    def switch(self, records: Sequence[dict]) -> None:
        self._next = records

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def _post(self, client: httpx.Client, batch: list[dict]) -> None:
        answer = client.post(self.url, json={"instances": batch})
        if answer.status_code != 200:
            self.failures.append(f"{answer.status_code}: {answer.text[:300]}")
        self.rows += len(batch)

    def _send(self) -> None:
        began, sent, position = time.monotonic(), 0, 0
        with httpx.Client(timeout=30) as client:
            while not self._stop.is_set():
                if self._next is not None:
                    self._records, self._next, position = self._next, None, 0
                    self.switched_at = time.time()
                batch = [self._records[(position + i) % len(self._records)] for i in range(ROWS_PER_REQUEST)]
                position += ROWS_PER_REQUEST
                try:
                    self._post(client, batch)
                except httpx.HTTPError as err:
                    self.failures.append(repr(err))
                sent += ROWS_PER_REQUEST
                self._stop.wait(max(0.0, began + sent / self.rows_per_second - time.monotonic()))


# --- the processes ------------------------------------------------------------------------------


@dataclasses.dataclass
class Chain:
    """The running chain's endpoints and where its processes log."""

    services_dir: str
    pipeline_root: str
    model_url: str
    prometheus_url: str
    alertmanager_url: str
    receiver_log: str

    def log_tails(self, lines: int = 15) -> str:
        tails = []
        for path in sorted(glob.glob(os.path.join(self.services_dir, local_services.SERVICES_DIR, "*.log"))):
            with open(path, encoding="utf-8", errors="replace") as f:
                tails.append(f"--- {os.path.basename(path)}\n" + "".join(f.readlines()[-lines:]))
        return "\n".join(tails)


@dataclasses.dataclass(frozen=True)
class Settings:
    """How the chain is run (its flags; see :func:`main`)."""

    window_rows: int = 2000
    scrape_seconds: float = 5.0
    for_: str | None = None
    group_wait: str | None = None
    group_interval: str | None = None
    cooldown: str = DEFAULT_COOLDOWN
    rows_per_second: float = 20.0
    quiet_seconds: float = 30.0
    run_timeout_seconds: float = 1200.0


@contextlib.contextmanager
def chain(
    pipeline_root: str, model_dir: str, settings: Settings, workdir: str, binaries: dict[str, str]
) -> Iterator[Chain]:
    """The model server, Prometheus, Alertmanager and the receiver, started in that order on free
    loopback ports (services of ``workdir``, :mod:`kfstack.serving.local_services`); all stopped
    on the way out."""
    token_file = os.path.join(workdir, "token")
    with open(token_file, "w", encoding="utf-8") as f:
        f.write(os.urandom(16).hex())
    try:
        model = local_services.start_service(
            workdir,
            "model-server",
            lambda port: predictor_command(
                model_dir,
                SERVICE,
                port,
                "--live_drift=on",
                f"--live_drift_window_rows={settings.window_rows}",
                "--enable_latency_logging=false",
            ),
            ready_path=f"/v2/models/{SERVICE}/ready",
        )
        receiver = local_services.start_service(
            workdir,
            "alert-receiver",
            lambda port: [
                *(sys.executable, "-m", "kfstack.app.cli", "alert-receiver", "--local"),
                *(f"--retrain={SERVICE}={PIPELINE}", *_params(RETRAINING)),
                *(f"--pipeline-root={pipeline_root}", f"--token-file={token_file}"),
                *("--address=127.0.0.1", f"--port={port}", f"--cooldown={settings.cooldown}"),
            ],
            ready_path="/healthz",
        )
        am_dir = os.path.join(workdir, "alertmanager")
        os.makedirs(am_dir, exist_ok=True)
        config = alertmanager_config(receiver.url, token_file, settings.group_wait, settings.group_interval)
        with open(os.path.join(am_dir, "alertmanager.yml"), "w", encoding="utf-8") as f:
            yaml.safe_dump(config, f)
        alertmanager = local_services.start_service(
            workdir,
            "alertmanager",
            lambda port: [
                binaries["prometheus-alertmanager"],
                f"--config.file={os.path.join(am_dir, 'alertmanager.yml')}",
                # No gossip port: one private Alertmanager (alertmanager 0.25 cmd/alertmanager/main.go).
                "--cluster.listen-address=",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--storage.path={os.path.join(am_dir, 'data')}",
            ],
            ready_path="/-/ready",
        )
        prom_dir = os.path.join(workdir, "prometheus")
        os.makedirs(prom_dir, exist_ok=True)
        with open(os.path.join(prom_dir, "rules.yaml"), "w", encoding="utf-8") as f:
            yaml.safe_dump({"groups": rule_groups(settings.for_)}, f, sort_keys=False)
        target, am_target = model.url.removeprefix("http://"), alertmanager.url.removeprefix("http://")
        with open(os.path.join(prom_dir, "prometheus.yaml"), "w", encoding="utf-8") as f:
            yaml.safe_dump(prometheus_config(target, am_target, settings.scrape_seconds), f)
        prometheus = local_services.start_service(
            workdir,
            "prometheus",
            lambda port: [
                binaries["prometheus"],
                f"--config.file={os.path.join(prom_dir, 'prometheus.yaml')}",
                f"--storage.tsdb.path={os.path.join(prom_dir, 'data')}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            ready_path="/-/ready",
        )
        yield Chain(
            services_dir=workdir,
            pipeline_root=pipeline_root,
            model_url=model.url,
            prometheus_url=prometheus.url,
            alertmanager_url=alertmanager.url,
            receiver_log=receiver.log_path,
        )
    finally:
        local_services.stop_services(workdir)


# --- what each link shows -----------------------------------------------------------------------


def server_gauges(chain: Chain) -> tuple[float | None, float | None]:
    """The server's own (max PSI, window rows) at a scrape of its /metrics."""
    text = httpx.get(f"{chain.model_url}/metrics", timeout=10).text
    psi, rows = _MAX_PSI.search(text), _WINDOW_ROWS.search(text)
    return (float(psi.group(1)) if psi else None, float(rows.group(1)) if rows else None)


def alert_states(chain: Chain) -> set[str]:
    """KfstackLiveDrift's states in Prometheus now (pending, firing; empty: inactive)."""
    alerts = httpx.get(f"{chain.prometheus_url}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
    return {a["state"] for a in alerts if a["labels"].get("alertname") == ALERT}


def scraped_max_psi(chain: Chain) -> float | None:
    query = f'max(kfstack_predictor_drift_max_psi{{inference_service="{SERVICE}"}})'
    answer = httpx.get(f"{chain.prometheus_url}/api/v1/query", params={"query": query}, timeout=10).json()
    result = answer["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def receiver_decisions(chain: Chain) -> list[tuple[float, dict[str, Any]]]:
    """The receiver's decision lines so far (one JSON object per alert, docs/retraining.md), each
    with its time (the log line's own, ``kfstack``'s logging format: local time, milliseconds)."""
    with open(chain.receiver_log, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    decisions = []
    for line in lines:
        start = line.find("{")
        if start < 0 or '"decision"' not in line:
            continue
        with contextlib.suppress(ValueError):
            stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            decisions.append((stamp, json.loads(line[start:])))
    return decisions


def wait_for(condition: Callable[[], Any], seconds: float, what: str, chain: Chain) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise ChainError(f"{what} within {seconds:g} s\n{chain.log_tails()}")
        time.sleep(POLL_SECONDS)


def stop_run(run_path: str) -> None:
    """Stops a started run still going (the measure gave up): the receiver's child and its own
    children, found by the run directory on their command line."""
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = process.info.get("cmdline") or []
        if "--resume" in cmdline and run_path in cmdline:
            with contextlib.suppress(psutil.Error):
                for child in process.children(recursive=True):
                    child.terminate()
                process.terminate()


# --- the measure --------------------------------------------------------------------------------

# The links after the drift, in the order they happen (the receiver creates the run directory,
# then logs its decision; the run's end is last).
LINKS = (
    "gauge_over_line",
    "alert_pending",
    "alert_firing",
    "run_directory_created",
    "receiver_started_a_run",
    "run_finished",
)


class Links:
    """Probes each link of the chain after the drift, all at every poll, and keeps the wall-clock
    time each was first seen (the receiver's decision: its log line's time)."""

    def __init__(self, chain: Chain, line: float, runs_before: set[str]) -> None:
        self.chain = chain
        self.line = line
        self.runs_before = runs_before
        self.seen: dict[str, float] = {}
        self.run_path: str | None = None
        self.decision: dict[str, Any] | None = None

    def poll(self) -> None:
        now = time.time()
        c = self.chain
        if "gauge_over_line" not in self.seen:
            psi, _ = server_gauges(c)
            if psi is not None and psi > self.line:
                self.seen["gauge_over_line"] = now
        states = alert_states(c)
        if states & {"pending", "firing"}:
            self.seen.setdefault("alert_pending", now)
        if "firing" in states:
            self.seen.setdefault("alert_firing", now)
        if self.run_path is None:
            fresh = [
                r.path for r in run_directory.list_runs(c.pipeline_root) if r.path not in self.runs_before
            ]
            if fresh:
                self.run_path = fresh[0]
                self.seen["run_directory_created"] = now
        if self.decision is None:
            for stamp, decision in receiver_decisions(c):
                if decision.get("inference_service") == SERVICE:
                    if decision["decision"] != "started":
                        raise ChainError(f"the receiver did not start a run: {decision}\n{c.log_tails()}")
                    self.decision = decision
                    self.seen["receiver_started_a_run"] = stamp
                    break
        if self.run_path and os.path.isfile(os.path.join(self.run_path, run_directory.SUMMARY_FILE)):
            self.seen.setdefault("run_finished", now)

    def done(self) -> bool:
        return set(LINKS) <= set(self.seen)


def measure(
    pipeline_root: str,
    settings: Settings,
    binaries: dict[str, str],
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Runs the chain once on the model in production under ``pipeline_root``; the seconds from
    the first drifted request to each link, and what the run left.

    Raises:
        ChainError: Nothing in production, a false alarm on undrifted traffic, or a link that
            did not happen in time.
    """
    before = production(pipeline_root)
    if before is None:
        raise ChainError(f"no {SERVICE} model in production under {pipeline_root}")
    line = psi_line()
    rule_for = str(drift_rule(rule_groups(settings.for_))["for"])
    route = retraining_route(
        alertmanager_config("http://receiver", "token", settings.group_wait, settings.group_interval)
    )
    # Until the run starts: the traffic's turnover, the for:, group_wait, and a minute of slack.
    alerting_seconds = (
        300
        + parse_duration(rule_for, "for").total_seconds()
        + parse_duration(route["group_wait"], "group_wait").total_seconds()
    )
    log("drifting the held-out flights (Spark)")
    undrifted, drifted = traffic_records(held_out_requests(pipeline_root, before.run_id), DRIFT_SHARE)
    runs_before = {run.path for run in run_directory.list_runs(pipeline_root)}
    links: Links | None = None
    with (
        tempfile.TemporaryDirectory(prefix="kfstack-drift-chain-") as workdir,
        chain(pipeline_root, before.model_dir, settings, workdir, binaries) as c,
    ):
        traffic = Traffic(f"{c.model_url}/v1/models/{SERVICE}:predict", undrifted, settings.rows_per_second)
        try:
            log(f"filling the window ({settings.window_rows} undrifted rows)")
            traffic.fill(settings.window_rows)
            traffic.start()
            wait_for(lambda: scraped_max_psi(c) is not None, 60, "Prometheus scraped no max PSI", c)
            log(f"quiet: {settings.quiet_seconds:g} s of undrifted traffic")
            quiet_psi: list[float] = []
            deadline = time.monotonic() + settings.quiet_seconds
            while time.monotonic() < deadline:
                states = alert_states(c)
                if states:
                    raise ChainError(f"{ALERT} went {sorted(states)} on undrifted traffic\n{c.log_tails()}")
                quiet_psi.append(scraped_max_psi(c) or 0.0)
                time.sleep(POLL_SECONDS)
            log("drift injected")
            traffic.switch(drifted)
            wait_for(lambda: traffic.switched_at, 30, "the traffic did not switch", c)
            assert traffic.switched_at is not None
            injected = traffic.switched_at
            links = Links(c, line, runs_before)
            reported: set[str] = set()
            while not links.done():
                links.poll()
                for name in LINKS:
                    if name in links.seen and name not in reported:
                        reported.add(name)
                        log(f"{name}: {links.seen[name] - injected:.2f} s")
                started = links.seen.get("run_directory_created")
                waited = time.time() - (started or injected)
                if waited > (settings.run_timeout_seconds if started else alerting_seconds):
                    missing = [name for name in LINKS if name not in links.seen]
                    raise ChainError(f"no {', '.join(missing)} after {waited:.0f} s\n{c.log_tails()}")
                time.sleep(POLL_SECONDS)
            quiet_max = max(quiet_psi, default=None)
            failures, rows = list(traffic.failures), traffic.rows
            decisions = [decision for _, decision in receiver_decisions(c)]
        finally:
            traffic.stop()
            if links and links.run_path and "run_finished" not in links.seen:
                stop_run(links.run_path)
    run_path = links.run_path
    assert run_path is not None
    with open(os.path.join(run_path, run_directory.SUMMARY_FILE), encoding="utf-8") as f:
        summary = json.load(f)
    after = production(pipeline_root)
    seconds = {name: round(links.seen[name] - injected, 2) for name in LINKS}
    return {
        "drift_injected_at": datetime.datetime.fromtimestamp(injected, datetime.UTC).isoformat(
            timespec="seconds"
        ),
        "seconds_from_drift": seconds,
        "seconds_firing_to_run_directory": round(
            seconds["run_directory_created"] - seconds["alert_firing"], 2
        ),
        "seconds_run_directory_to_retrained_model": round(
            seconds["run_finished"] - seconds["run_directory_created"], 2
        ),
        "run": {
            "directory": os.path.basename(run_path),
            "status": summary.get("status"),
            "error": summary.get("error"),
            "trigger": (summary.get("arguments") or {}).get("trigger"),
            "drift": {
                k: (summary.get("drift") or {}).get(k) for k in ("decision", "max_psi", "drifted_features")
            },
            "gate": (summary.get("gate") or {}).get("decision"),
            "serving": {k: (summary.get("serving") or {}).get(k) for k in ("decision", "model_version")},
        },
        "production_before": before.version,
        "production_after": after.version if after else None,
        "retrained_model_in_production": bool(after and after.version != before.version),
        "receiver_decisions": [{k: d.get(k) for k in ("decision", "reason")} for d in decisions],
        "undrifted_max_psi_seen": quiet_max,
        "traffic": {
            "rows_per_second": settings.rows_per_second,
            "rows_per_request": ROWS_PER_REQUEST,
            "rows_sent": rows,
            "failed_requests": failures[:5],
            "drift_share": DRIFT_SHARE,
        },
        "settings": {
            "psi_line": line,
            "for": rule_for,
            "shipped_for": drift_rule(shipped_rule_groups())["for"],
            "scrape_and_evaluation_interval_seconds": settings.scrape_seconds,
            "window_rows": settings.window_rows,
            "quiet_seconds": settings.quiet_seconds,
            "group_wait": route["group_wait"],
            "group_interval": route["group_interval"],
            "repeat_interval": route["repeat_interval"],
            "cooldown": settings.cooldown,
            "retraining_arguments": RETRAINING,
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--pipeline-root",
        default=None,
        help="a pipeline root whose flights-delay model in production a first-window run deployed, "
        "as this benchmark's first step does (default: a new root, with that step); the retraining "
        "run is added to it (and its model, retrained on the week-later window, would not be "
        "retrained again on that window: start from a first-window model)",
    )
    parser.add_argument(
        "--for", dest="for_", default=None, help="KfstackLiveDrift's for: (default: the shipped one)"
    )
    parser.add_argument(
        "--group-wait", default=None, help="the route's group_wait (default: the shipped one)"
    )
    parser.add_argument(
        "--group-interval", default=None, help="the route's group_interval (default: the shipped one)"
    )
    parser.add_argument("--cooldown", default=DEFAULT_COOLDOWN, help="the receiver's --cooldown")
    parser.add_argument(
        "--scrape-interval", type=float, default=5.0, help="seconds; also the rules' evaluation"
    )
    parser.add_argument("--window-rows", type=int, default=2000, help="the server's live-drift window")
    parser.add_argument("--rows-per-second", type=float, default=20.0, help="the traffic's rate")
    parser.add_argument(
        "--quiet", type=float, default=30.0, help="seconds of undrifted traffic with no alert"
    )
    args = parser.parse_args(argv)
    found = {name: binary(name) for name in BINARIES}
    missing = [f"{name} (Debian package {BINARIES[name]})" for name, path in found.items() if path is None]
    if missing:
        parser.error(f"not installed: {', '.join(missing)}")
    if args.for_ is not None:
        parse_duration(args.for_, "--for")
    settings = Settings(
        window_rows=args.window_rows,
        scrape_seconds=args.scrape_interval,
        for_=args.for_,
        group_wait=args.group_wait,
        group_interval=args.group_interval,
        cooldown=args.cooldown,
        rows_per_second=args.rows_per_second,
        quiet_seconds=args.quiet,
    )
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        root = args.pipeline_root or stack.enter_context(tempfile.TemporaryDirectory(prefix="kfstack-bench-"))
        first_seconds = None
        if production(root) is None:
            print(
                "deploying a first model (kfstack run --local flights-retraining)",
                file=sys.stderr,
                flush=True,
            )
            began = time.monotonic()
            deploy_first_model(root)
            first_seconds = round(time.monotonic() - began, 1)
        figures = measure(
            root,
            settings,
            {k: v for k, v in found.items() if v},
            log=lambda m: print(m, file=sys.stderr, flush=True),
        )
    command = "python -m benchmarks.drift_to_retraining " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    result = {
        "benchmark": "drift_to_retraining",
        "command": command.strip(),
        "machine": machine_facts(),
        **figures,
        "first_model_seconds": first_seconds,
        "seconds": round(time.monotonic() - started, 1),
    }
    write_result(result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
