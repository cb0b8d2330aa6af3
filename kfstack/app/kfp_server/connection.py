"""The connection to a KFP API server: a ``kfp.Client`` whose host and credentials are checked
and whose requests are bounded in time, and what every request of :mod:`kfstack.app.kfp_server`
shares (the user namespace, list filters and pages, the UI's base URL).

Errors: inside :func:`connect` (or :func:`api_errors`), an unreachable server, refused
credentials and refused requests become one-line :mod:`kfstack.errors` (exit 2, nothing started);
what was asked for that does not exist (pipeline, version, schedule) is a ``UsageError``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import kfp
import kfp_server_api
import urllib3

from kfstack.errors import (
    KfpAuthError,
    KfpRequestError,
    KfpServerUnavailableError,
    KfstackError,
)

# Connecting, and each read of an answer, give up after this long: a host that drops packets or
# never answers must not hang the command (kfp.Client sets no timeout of its own).
REQUEST_TIMEOUT_S = 30.0
PAGE_SIZE = 100
_HOST_HINT = (
    "check --host (or $KF_PIPELINES_ENDPOINT, the kubeconfig context) and that the server is up; "
    "from outside the cluster: kubectl port-forward svc/ml-pipeline-ui 8080:80 -n kubeflow, then "
    "--host http://localhost:8080"
)


class _Client(kfp.Client):
    """``kfp.Client`` whose health check asks once, with a clear error, and whose requests are
    bounded in time.

    ``kfp.Client.__init__`` asks ``/healthz`` (single-user deployments: to learn whether the
    server is multi-user) up to five times, 5 s apart, on *any* API error -- a 401 included -- and
    logs a traceback each time. A command line should say at once what is wrong. The answer is
    kept: :func:`connect` asks it when ``__init__`` did not (a namespace was given), as the probe of
    host and credentials before anything is sent.

    Time: ``kfp_server_api`` sends every request with ``timeout=None`` unless the call passes
    ``_request_timeout``, which ``kfp.Client``'s methods never do, so a host that accepts and
    never answers would hang the command. The first health check (which ``__init__`` reaches
    right after creating the API client) gives the client's REST object a default of
    :data:`REQUEST_TIMEOUT_S` for connecting and for each read.
    """

    kfstack_healthz: Any = None

    def _load_config(self, *args: Any, **kwargs: Any) -> Any:
        config = super()._load_config(*args, **kwargs)
        # urllib3 retries a request three times by default, a timed-out read included: four
        # times REQUEST_TIMEOUT_S before a silent host is reported. One retry of a failed
        # connection (a port-forward restarting), none of a read that timed out.
        config.retries = urllib3.util.Retry(total=3, connect=1, read=0)
        return config

    def _bound_requests(self) -> None:
        rest = self.healthzs.api_client.rest_client  # one REST object behind every service API
        if getattr(rest, "kfstack_bounded", False):
            return
        request = rest.request  # RESTClientObject.GET/POST/... all call self.request

        def bounded(*args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
            timeout = _request_timeout or (REQUEST_TIMEOUT_S, REQUEST_TIMEOUT_S)
            return request(*args, _request_timeout=timeout, **kwargs)

        rest.request = bounded
        rest.kfstack_bounded = True

    def get_kfp_healthz(self, sleep_duration: int = 5) -> Any:
        if self.kfstack_healthz is None:
            self._bound_requests()
            with api_errors(self):
                # Raw, to tell the API's JSON from a login page a proxy answers with (HTTP 200).
                raw = self.healthzs.healthz_service_get_healthz(_preload_content=False)
            try:
                answer = json.loads(raw.data)
            except ValueError:
                answer = None
            if not isinstance(answer, dict):
                raise KfpAuthError(
                    f"{api_host(self)} answered the KFP health check with something else than the "
                    f"KFP API (a login page?); pass --token TOKEN, or --host the API itself"
                )
            self.kfstack_healthz = kfp_server_api.V2beta1GetHealthzResponse(
                multi_user=answer.get("multi_user"), pipeline_store=answer.get("pipeline_store")
            )
        return self.kfstack_healthz


@contextlib.contextmanager
def connect(host: str | None = None, namespace: str | None = None, token: str | None = None) -> Iterator[Any]:
    """A ``kfp.Client`` for the KFP API server, its host and credentials checked.

    Only what is given is passed on: ``kfp.Client`` resolves the rest itself (host:
    ``$KF_PIPELINES_ENDPOINT``, else in-cluster, else the kubeconfig context's API proxy;
    namespace: ``~/.config/kfp/context.json``). Connecting and every read of a request are bounded
    by :data:`REQUEST_TIMEOUT_S`; inside the block, API errors become :mod:`kfstack.errors`
    (:func:`api_errors`).

    Args:
        host: The API's URL (``http://localhost:8080``, ``https://kubeflow.example.com/pipeline``).
        namespace: The user namespace of a multi-user KFP.
        token: A bearer token the server (or its proxy) accepts.

    Raises:
        KfpServerUnavailableError: The server cannot be reached.
        KfpAuthError: It refuses the credentials.
    """
    given: dict[str, str] = {}
    if host:
        given["host"] = host
    if namespace:
        given["namespace"] = namespace
    if token:
        given["existing_token"] = token
    # urllib3 logs a warning per retry of a refused connection; the error says it once.
    pool_log = logging.getLogger("urllib3.connectionpool")
    previous_level = pool_log.level
    pool_log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            # Noise for a CLI user: "This client only works with Kubeflow Pipeline v2.0.0-beta.2
            # and later", and the https:// it assumes for a host without a scheme (--help says so).
            warnings.filterwarnings("ignore", message="This client only works", category=FutureWarning)
            warnings.filterwarnings("ignore", message="The host .* does not contain", category=UserWarning)
            # __init__ asks the health endpoint itself when no namespace is known (our override:
            # once, errors translated).
            client = _Client(**given)
        client.get_kfp_healthz()
        with api_errors(client):
            yield client
    finally:
        pool_log.setLevel(previous_level)


def api_host(client: Any) -> str:
    """The API server's URL, as ``kfp.Client`` resolved it."""
    return str(client.pipelines.api_client.configuration.host)


@contextlib.contextmanager
def api_errors(client: Any) -> Iterator[None]:
    """Turns what ``kfp_server_api`` and urllib3 raise into one-line :mod:`kfstack.errors`.

    Raises:
        KfpServerUnavailableError: No connection, or none that answered (refused, timed out, TLS).
        KfpAuthError: 401 or 403.
        KfpRequestError: Any other error status, with the server's own message.
    """
    try:
        yield
    except kfp_server_api.ApiException as err:
        raise _api_error(err, api_host(client)) from err
    except (urllib3.exceptions.HTTPError, ConnectionError) as err:
        raise KfpServerUnavailableError(
            f"cannot reach the KFP API server at {api_host(client)}: {_network_reason(err)}; {_HOST_HINT}"
        ) from err


def _api_error(err: Any, host: str) -> KfstackError:
    status = err.status or 0
    message = _server_message(err)
    if status == 0:  # kfp_server_api's own wrapping of a TLS failure
        return KfpServerUnavailableError(
            f"cannot reach the KFP API server at {host}: {message}; " + _HOST_HINT
        )
    answer = f"{status} {err.reason or ''}".strip() + (f": {message}" if message else "")
    if status in (401, 403):
        return KfpAuthError(
            f"the KFP API server at {host} refused the credentials ({answer}); pass a bearer token it "
            f"accepts (--token-file FILE, or $KFSTACK_KFP_TOKEN) and, on a multi-user KFP, --namespace "
            f"your namespace"
        )
    return KfpRequestError(f"the KFP API server at {host} answered {answer}")


def _server_message(err: Any) -> str:
    """The reason in an error answer's body (grpc-gateway's ``message``, the upload server's
    ``error_message``), else the body's start; one line."""
    body = err.body.decode("utf-8", "replace") if isinstance(err.body, bytes) else str(err.body or "")
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        for key in ("message", "error_message", "error"):
            if isinstance(data.get(key), str) and data[key]:
                body = data[key]
                break
    if not body:
        body = str(err.reason or "")
    return " ".join(body.split())[:300]


def _network_reason(err: BaseException) -> str:
    reason = getattr(err, "reason", None) if isinstance(err, urllib3.exceptions.MaxRetryError) else err
    reason = reason or err
    text = str(reason)
    if isinstance(reason, urllib3.exceptions.NameResolutionError):
        return "host name not found"
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        # (A subclass of ConnectTimeoutError in urllib3 2.x: tested first.)
        return "connection refused" if "refused" in text.lower() else f"no connection ({_last_part(text)})"
    if isinstance(reason, urllib3.exceptions.ConnectTimeoutError | socket.timeout):
        return f"connection timed out ({REQUEST_TIMEOUT_S:g} s)"
    if isinstance(reason, urllib3.exceptions.ReadTimeoutError):
        return f"no answer within {REQUEST_TIMEOUT_S:g} s"
    if isinstance(reason, urllib3.exceptions.SSLError):
        return f"TLS failure ({_last_part(text)})"
    return _last_part(text) or type(reason).__name__


def _last_part(text: str) -> str:
    """The end of a nested urllib3 message (``<object at 0x..>: Failed ...: [Errno 111] ...``)."""
    return " ".join(text.split(">: ")[-1].split())


def ui_base(client: Any) -> str:
    """The KFP UI's URL: what ``kfp.Client`` itself prints links with ($KF_PIPELINES_UI_ENDPOINT,
    else the host)."""
    return str(client._get_url_prefix()).rstrip("/")


def user_namespace(client: Any) -> str | None:
    """The user namespace ``kfp.Client`` holds (--namespace, or its context file), if any."""
    return client.get_user_namespace() or None


def name_filter(name: str) -> str:
    """A v2beta1 list filter: display_name equals ``name``."""
    return json.dumps({"predicates": [{"operation": "EQUALS", "key": "display_name", "string_value": name}]})


def pages(list_page: Callable[[str], Any], items: str) -> Iterator[Any]:
    """Every item of a paged v2beta1 list; ``list_page(token)`` asks one page."""
    token = ""
    while True:
        response = list_page(token)
        yield from getattr(response, items) or []
        token = response.next_page_token
        if not token:
            return
