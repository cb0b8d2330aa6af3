"""A real Prometheus (Debian's 2.42, a plain process on a free loopback port, its storage in a
temporary folder) scrapes a live kfstack model server under a short bounded load, with the
PrometheusRule's groups loaded: every query over kfstack's own metrics in the rules and in the
dashboard returns at least one series, and every rule evaluates without an error.

The server is the scikit-learn stand-in (``python -m kfstack.serving.format_server
--model_format=sklearn``) of a digits model fitted here, beside the profile of its training
pixels, so live drift is on (a window of WINDOW rows, full under the load). A static target's
labels stand in for what the PodMonitor's relabelling adds on a cluster (namespace, pod,
inference_service; no canary label: a stable pod).

How a query is taken: an alert's top-level comparison against its threshold is removed (the
signal, not whether it crosses the line now); Grafana's variables are substituted (a
``label_values(selector, label)`` variable query becomes ``group by (label) (selector)``). A
query over kfstack's metrics alone must return series as it stands; one that joins another
exporter's series (kube-state-metrics, DCGM), absent here, has each of its kfstack selectors
checked alone (the join itself is run by promtool on the fixture, test_alert_rules.py).
"""

from __future__ import annotations

import re
import subprocess
import time

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from kfstack.monitoring.profiling import profile_dataset, write_profile
from kfstack.serving.format_server import MODULE as FORMAT_SERVER
from kfstack.training.process_group import free_port
from tests.debian_tools import debian_tool
from tests.monitoring_manifests.monitoring_objects import dashboard, panel_queries, rule_groups, rules
from tests.serving import standard_models
from tests.serving.conftest import Predictor

MODEL = "digits"
PIXELS = tuple(f"pixel_{i}" for i in range(64))
WINDOW = 100
# The load, one round after another (a few seconds): 600 requests, so the hour's rate passes
# the 0.1 per second (360 requests) KfstackPredictorTrafficDrop needs of a baseline.
ROUNDS = 200
# The target labels the PodMonitor's relabelling would add to this pod's series.
TARGET_LABELS = {"namespace": "kfstack-test", "pod": "digits-predictor-0", "inference_service": MODEL}
GRAFANA_VARIABLES = {
    "$namespace": TARGET_LABELS["namespace"],
    "$inference_service": TARGET_LABELS["inference_service"],
    "$__rate_interval": "1m",
}
# The series of the metric contract (kfstack/serving/model_server.py): each must be read by some
# rule or panel, and each of those queries is checked here.
CONTRACT = {
    "kfstack_predictor_requests_total",
    "kfstack_predictor_requests_in_flight",
    "kfstack_predictor_request_duration_seconds_bucket",
    "kfstack_predictor_drift_psi",
    "kfstack_predictor_drift_max_psi",
    "kfstack_predictor_drift_window_rows",
    "process_resident_memory_bytes",
}
KEYWORDS = {
    *("by", "without", "on", "ignoring", "group_left", "group_right"),
    *("offset", "bool", "and", "or", "unless"),
}
THRESHOLD = re.compile(r"^(?P<signal>.*\S)\s*(?:>|<|>=|<=|==|!=)\s*[0-9.e+-]+\s*$", re.DOTALL)
LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.*),\s*(?P<label>\w+)\)$")


def metric_names(query: str) -> set[str]:
    """The series names a PromQL query reads (its selectors' names and recorded names)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', query)  # label values and label_replace's strings
    text = re.sub(r"\{[^}]*\}", " ", text)  # matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = re.findall(r"(?<![\w:])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()", text)
    return {name for name in names if name not in KEYWORDS and not re.fullmatch(r"\d+[smhdwy]", name)}


def selectors_of(query: str, names: set[str]) -> list[str]:
    return [
        match.group(0)
        for match in re.finditer(r"(?<![\w:])([a-zA-Z_:][\w:]*)(?![\w:])(\{[^}]*\})?", query)
        if match.group(1) in names
    ]


def queries() -> dict[str, str]:
    """Where each query comes from -> the query, as this test runs it."""
    found = {}
    for rule in rules():
        if "record" in rule:
            found[f"rule {rule['record']}"] = rule["expr"]
            continue
        match = THRESHOLD.match(rule["expr"])
        assert match, f"{rule['alert']}: its expression does not end in a comparison with its threshold"
        found[f"alert {rule['alert']}"] = match["signal"]
    board = dashboard()
    for title, expr in panel_queries(board):
        found[f"panel {title!r}: {expr[:40]}"] = expr
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            match = LABEL_VALUES.match(variable["query"]["query"])
            assert match, variable
            found[f"variable {variable['name']}"] = f"group by ({match['label']}) ({match['selector']})"
    for placeholder, value in GRAFANA_VARIABLES.items():
        found = {where: query.replace(placeholder, value) for where, query in found.items()}
    for where, query in found.items():
        assert "$" not in query.replace("$1", ""), f"{where}: a variable is left: {query}"
    return found


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("monitored-model")
    model_dir = str(root / "model")
    standard_models.sklearn_digits(model_dir)
    x, _ = standard_models.digits()
    train = x[: -standard_models.DIGITS_TEST_ROWS]
    columns = {name: train[:, i] for i, name in enumerate(PIXELS)}
    pq.write_table(pa.table(columns), str(root / "train.parquet"))
    profile = profile_dataset(str(root / "train.parquet"), PIXELS, ())
    write_profile({**profile, "feature_order": list(PIXELS)}, model_dir)
    return model_dir


@pytest.fixture(scope="module")
def prometheus(model_dir, tmp_path_factory):
    """(Prometheus' URL, the server's /metrics text) once the load's series are scraped."""
    binary = debian_tool("prometheus")
    root = tmp_path_factory.mktemp("prometheus")
    server = Predictor(
        model_dir,
        str(root / "run"),
        "--model_format=sklearn",
        f"--live_drift_window_rows={WINDOW}",
        "--live_drift=on",
        name=MODEL,
        module=FORMAT_SERVER,
        service=MODEL,
    )
    (root / "kfstack-rules.yaml").write_text(yaml.safe_dump({"groups": rule_groups()}, sort_keys=False))
    target = server.url.removeprefix("http://")
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
        "rule_files": ["kfstack-rules.yaml"],
        "scrape_configs": [
            {
                "job_name": "kfstack-model-server",
                "static_configs": [{"targets": [target], "labels": TARGET_LABELS}],
            }
        ],
    }
    (root / "prometheus.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = open(root / "prometheus.log", "w")  # noqa: SIM115 -- closed after the process ends
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={root / 'prometheus.yaml'}",
            f"--storage.tsdb.path={root / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: httpx.get(f"{url}/-/ready", timeout=2).status_code == 200, 30, root / "prometheus.log")
        # One round first, so every counter's first sample is in before the load: a rate counts
        # from a series' first sample, and the load is what the hour's baseline must see.
        with httpx.Client(timeout=10) as client:
            _round(client, server, 0)
        _wait(lambda: len(_query(url, "kfstack_predictor_requests_total")) == 3, 30, root / "prometheus.log")
        with httpx.Client(timeout=10) as client:
            for i in range(ROUNDS):
                _round(client, server, i)
        metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
        # Two scrapes after the load, so every rate has its samples; then the rules a second more.
        _wait(lambda: _scraped_after_load(url), 30, root / "prometheus.log")
        yield url, metrics
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
        server.stop()


def _wait(ready, seconds: float, log) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"not ready in {seconds} s; Prometheus' log:\n{log.read_text()[-3000:]}")


def _round(client: httpx.Client, server: Predictor, i: int) -> None:
    """One round of the load: a V1 and a V2 request of 10 rows each (the drift window fills) and a
    malformed one (a 400): a series for each outcome and protocol."""
    x, _ = standard_models.digits()
    start = (i * 10) % 280
    rows = x[-standard_models.DIGITS_TEST_ROWS :][start : start + 10].tolist()
    v2 = {"name": "input-0", "shape": [len(rows), 64], "datatype": "FP64", "data": rows}
    infer_url = f"{server.url}/v2/models/{MODEL}/infer"
    assert client.post(server.predict_url, json={"instances": rows}).status_code == 200
    assert client.post(infer_url, json={"inputs": [v2]}).status_code == 200
    assert client.post(server.predict_url, json={"instances": [[1.0, 2.0]]}).status_code == 400


def _scraped_after_load(url: str) -> bool:
    """The drift gauge and three samples of the final request count are in, and the rules ran."""
    requests = 3 * (ROUNDS + 1)
    final = (
        f"sum(kfstack_predictor_requests_total) == {requests} and sum(kfstack_predictor_drift_max_psi) >= 0"
    )
    answer = _query(url, f"count_over_time(({final})[5s:1s])")
    return bool(answer) and float(answer[0]["value"][1]) >= 3


def _query(url: str, query: str) -> list[dict]:
    response = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=10)
    assert response.status_code == 200, f"{query}: {response.text}"
    return response.json()["data"]["result"]


@pytest.mark.slow
def test_every_kfstack_query_returns_series(prometheus):
    url, metrics = prometheus
    served = set(re.findall(r"^([a-zA-Z_:][\w:]*)(?:\{| )", metrics, re.MULTILINE))
    assert served >= CONTRACT, CONTRACT - served
    empty, read = [], set()
    for where, query in queries().items():
        names = metric_names(query)
        own = names & served
        read |= own
        if not own:
            continue
        checked = [query] if names <= served else selectors_of(query, own)
        empty += [f"{where}: {q}" for q in checked if not _query(url, q)]
    assert not empty, "no series for:\n" + "\n".join(empty)
    assert read >= CONTRACT, f"no rule or panel reads {sorted(CONTRACT - read)}"


@pytest.mark.slow
def test_every_rule_evaluates_on_the_live_series(prometheus):
    url, _ = prometheus
    groups = httpx.get(f"{url}/api/v1/rules", timeout=10).json()["data"]["groups"]
    evaluated = {rule["name"]: rule for group in groups for rule in group["rules"]}
    assert set(evaluated) == {rule.get("alert") or rule["record"] for rule in rules()}
    broken = {name: rule.get("lastError") for name, rule in evaluated.items() if rule["health"] != "ok"}
    assert not broken, broken


def test_the_query_reader_finds_names_past_labels_ranges_and_functions():
    query = (
        'sum by (namespace, le) (rate(a_total{outcome="error", x=~"b|c"}[5m]) offset 1h)'
        " / on (namespace) group_left (pod) kfstack:rec:info"
        ' or label_replace(d, "x", "$1", "y", "(.+)")'
    )
    assert metric_names(query) == {"a_total", "kfstack:rec:info", "d"}
    assert selectors_of(query, {"a_total"}) == ['a_total{outcome="error", x=~"b|c"}']
