"""The synchronous gateway client (every operation of the spec), on httpx.

Sends never raise for network, HTTP or gateway problems: they return a classified
:class:`~gateway.outcomes.SendOutcome`. Bad input raises
:class:`~gateway.errors.RequestValidationError` before any I/O; instance operations raise
:class:`~gateway.errors.GatewayError` when the gateway refuses or cannot be reached.
The ``transport`` argument is the test seam (``httpx.MockTransport``, a real sandbox...).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from gateway.classify import (
    classify_send_response,
    classify_transport_error,
    instance_id_of,
    interpret_instance_response,
    is_certainly_unsent,
    qr_data_uri_of,
)
from gateway.dialects import GATEWAY_KINDS, NOTHING_MORE, Capabilities, GatewayKind, dialect_of
from gateway.errors import GatewayError, RequestValidationError, install_log_redaction, redact
from gateway.messages import Message
from gateway.outcomes import InstanceProblem, OutcomeKind, SendOutcome
from gateway.requests import (
    GatewayRequest,
    HttpMethod,
    Prefix,
    SendMethod,
    base_path,
    build_instance_operation,
    build_send,
    build_set_webhook,
    validate_http_url,
)
from gateway.send_transport import WireResponse, WireSender, wire_usable
from gateway.tls import client_ssl_context

Clock = Callable[[], datetime]
USER_AGENT = "gatecast/0.1 (+https://github.com/gatecast)"
_FALLBACK_STATUSES = (404, 405)
# Drop idle connections before common server keep-alive timeouts (uvicorn 5 s, nginx 75 s):
# a request written on a connection the server is closing fails after it may have left,
# which would make the send ambiguous for no reason.
KEEPALIVE_LIMITS = httpx.Limits(
    max_connections=100, max_keepalive_connections=20, keepalive_expiry=4.0
)


@dataclass(frozen=True)
class QrCodeResult:
    """What get_qrcode returned: the QR as a data URI, or None when it comes via webhook."""

    data_uri: str | None
    message: str = ""


def _utcnow() -> datetime:
    return datetime.now(UTC)


#: the modules of the gateway families besides the spec's (docs/architecture.md)
_DIALECTS: dict[str, Any] = {kind: dialect_of(kind) for kind in GATEWAY_KINDS if kind != "spec"}


class ClientCore:
    """Everything the sync and async clients share: configuration, URLs, credentials,
    the remembered instance-operation method, and turning responses into results."""

    def __init__(
        self,
        base_url: str,
        access_token: str,
        *,
        prefix: Prefix,
        send_method: SendMethod,
        timeout: float,
        connect_retries: int,
        connect_retry_wait: float,
        clock: Clock | None,
        kind: GatewayKind = "spec",
    ) -> None:
        if not isinstance(access_token, str) or not access_token.strip():
            raise RequestValidationError("access_token", "is required")
        if send_method not in ("get", "post"):
            raise RequestValidationError("send_method", f"{send_method!r} is not 'get' or 'post'")
        if timeout <= 0:
            raise RequestValidationError("timeout", "must be positive")
        if connect_retries < 0:
            raise RequestValidationError("connect_retries", "must not be negative")
        if kind not in GATEWAY_KINDS:
            raise RequestValidationError(
                "kind", f"{kind!r} is not one of {', '.join(GATEWAY_KINDS)}"
            )
        self.kind: GatewayKind = kind
        #: the family's module (requests, outcomes); None: the spec's gateway
        self.dialect = _DIALECTS.get(kind)
        # Evolution API's and WAHA's routes hang off the base URL itself, without a prefix
        self.base = (
            validate_http_url(base_url, "base_url").rstrip("/") + "/"
            if self.dialect is not None
            else base_path(base_url, prefix)
        )
        self.prefix = prefix
        self.send_method: SendMethod = send_method
        self.timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        self.connect_retries = connect_retries
        self.connect_retry_wait = connect_retry_wait
        self.clock: Clock = clock or _utcnow
        self._token = access_token.strip()
        # What worked for instance operations on this gateway: per operation, and the
        # method to try first for operations not yet seen.
        self._method_for: dict[str, HttpMethod] = {}
        self._default_method: HttpMethod = "POST"
        install_log_redaction()

    # -- presentation -------------------------------------------------------------
    def http_options(self) -> dict[str, Any]:
        """The httpx client options both the sync and the async face use."""
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self.kind == "evolution":
            headers["apikey"] = self._token  # Evolution API reads its key from this header
        elif self.kind == "waha":
            headers["X-Api-Key"] = self._token  # WAHA's key header
        return {
            "base_url": self.base,
            "timeout": self.timeout,
            "follow_redirects": False,
            "limits": KEEPALIVE_LIMITS,
            "headers": headers,
            "verify": client_ssl_context(),  # one per process: building one costs ~0.2 s
        }

    def display_base(self) -> str:
        """The base URL without user info, for reprs and messages."""
        url = httpx.URL(self.base)
        return str(url.copy_with(username=None, password=None))

    def redact(self, text: str) -> str:
        """``text`` without the access token."""
        return redact(text, (self._token,))

    def repr_for(self, cls: str) -> str:
        if self.dialect is not None:
            return f"{cls}(base_url={self.display_base()!r}, kind={self.kind!r})"
        return (
            f"{cls}(base_url={self.display_base()!r}, prefix={self.prefix!r}, "
            f"send_method={self.send_method!r})"
        )

    @property
    def capabilities(self) -> Capabilities:
        """What this client's gateway kind offers beyond sending (number check, typing;
        decision 68): its dialect's ``CAPABILITIES``, nothing for the spec's gateway."""
        return self.dialect.CAPABILITIES if self.dialect is not None else NOTHING_MORE

    def _dialect_with(self, capability: str) -> Any:
        """The dialect module, when its capabilities say ``capability``."""
        if self.dialect is None or not getattr(self.capabilities, capability):
            raise GatewayError(
                OutcomeKind.PERMANENT,
                None,
                f"this gateway has no {capability.replace('_', ' ')}",
            )
        return self.dialect

    def number_check_request(self, instance_id: str, numbers: list[str]) -> GatewayRequest:
        """The dialect's number-check request (a kind whose capabilities say
        ``number_check``)."""
        req: GatewayRequest = self._dialect_with("number_check").build_number_check(
            instance_id, numbers
        )
        return req

    def number_check_answers(self, response: httpx.Response) -> dict[str, bool]:
        """``{digits: on the app}`` from the dialect's number-check answer."""
        try:
            answers: dict[str, bool] = self._dialect_with("number_check").read_number_check(
                response.status_code, response.headers, response.content, now=self.clock()
            )
        except GatewayError as exc:
            exc.message = self.redact(exc.message)
            exc.args = (exc.message,)
            raise
        return answers

    def typing_request(self, instance_id: str, to: str, seconds: float) -> GatewayRequest:
        """The dialect's typing request (a kind whose capabilities say ``typing``)."""
        req: GatewayRequest = self._dialect_with("typing").build_typing(instance_id, to, seconds)
        return req

    @property
    def falls_back(self) -> bool:
        """Whether an instance operation answered 404/405 is tried with the other method
        (the spec's gateways differ; Evolution API's routes have one method each)."""
        return self.kind == "spec"

    def build_send(self, instance_id: str, to: str, message: Message) -> GatewayRequest:
        """The request that sends ``message`` in this client's dialect."""
        if self.dialect is not None:
            req: GatewayRequest = self.dialect.build_send(instance_id, to, message)
            return req
        return build_send(instance_id, to, message, send_method=self.send_method)

    # -- requests -----------------------------------------------------------------
    def httpx_arguments(self, req: GatewayRequest) -> dict[str, Any]:
        """Keyword arguments for ``httpx.Client.request`` with the token where it belongs."""
        params = dict(req.params)
        body = dict(req.json) if req.json is not None else None
        if req.credentials == "header":
            pass  # in the client's headers (http_options)
        elif req.credentials == "body" and body is not None:
            body["access_token"] = self._token
        else:
            params["access_token"] = self._token
        args: dict[str, Any] = {"method": req.method, "url": req.endpoint, "params": params}
        if body is not None:
            args["json"] = body
        return args

    def retrying_kwargs(self) -> dict[str, Any]:
        return {
            "stop": stop_after_attempt(self.connect_retries + 1),
            "wait": wait_exponential(multiplier=self.connect_retry_wait, max=2.0),
            "retry": retry_if_exception(is_certainly_unsent),
            "reraise": True,
        }

    def instance_methods(self, operation: str) -> tuple[HttpMethod, HttpMethod]:
        first = self._method_for.get(operation, self._default_method)
        return first, ("GET" if first == "POST" else "POST")

    def remember(self, operation: str, method: HttpMethod) -> None:
        self._method_for[operation] = method
        self._default_method = method

    # -- responses ----------------------------------------------------------------
    def send_outcome(
        self, response: httpx.Response | WireResponse, req: GatewayRequest
    ) -> SendOutcome:
        classify = self.dialect.classify_send if self.dialect else classify_send_response
        outcome = classify(
            response.status_code, response.headers, response.content, now=self.clock()
        )
        if (
            req.credentials == "body"
            and outcome.kind in (OutcomeKind.PERMANENT, OutcomeKind.INSTANCE)
            and "is required" in outcome.reason.lower()
        ):
            # We validated and sent every required field (token and instance id included):
            # this gateway did not read the JSON body (field notes: some builds never read
            # number or group_id from JSON). Pause the sender with a hint instead of failing
            # recipients or blaming the token.
            outcome = replace(
                outcome,
                kind=OutcomeKind.INSTANCE,
                problem=InstanceProblem.GATEWAY_MISCONFIGURED,
                reason=f"{outcome.reason} (sent in the JSON body: this gateway does not read "
                "it; set GATECAST_SEND_METHOD=get)",
            )
        reason = self.redact(outcome.reason)  # a gateway may echo the token back
        return outcome if reason == outcome.reason else replace(outcome, reason=reason)

    def transport_outcome(self, exc: httpx.HTTPError) -> SendOutcome:
        outcome = classify_transport_error(exc)
        detail = self.redact(str(exc))
        if detail:
            outcome = replace(outcome, reason=f"{outcome.reason} ({detail[:200]})")
        return outcome

    def instance_error(self, operation: str, exc: httpx.HTTPError) -> GatewayError:
        outcome = self.transport_outcome(exc)
        return GatewayError(outcome.kind, outcome.problem, f"{operation}: {outcome.reason}")

    def instance_doc(self, operation: str, response: httpx.Response) -> Mapping[str, Any]:
        interpret = (
            self.dialect.interpret_operation if self.dialect else interpret_instance_response
        )
        try:
            return interpret(
                operation,
                response.status_code,
                response.headers,
                response.content,
                now=self.clock(),
            )
        except GatewayError as exc:
            exc.message = self.redact(exc.message)
            exc.args = (exc.message,)
            raise

    def build_operation(
        self, operation: str, instance_id: str | None, method: HttpMethod, extra: dict[str, str]
    ) -> GatewayRequest:
        if self.dialect is not None:
            req: GatewayRequest = self.dialect.build_operation(operation, instance_id, extra)
            return req
        if operation == "set_webhook":
            return build_set_webhook(
                instance_id or "",
                extra["webhook_url"],
                extra["enable"] == "true",
                method=method,
            )
        return build_instance_operation(operation, instance_id, method=method)


class GatewayClient:
    """A synchronous client of one gateway (one base URL, prefix and access token)."""

    def __init__(
        self,
        base_url: str,
        access_token: str,
        *,
        prefix: Prefix = "api",
        send_method: SendMethod = "get",
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        connect_retries: int = 2,
        connect_retry_wait: float = 0.2,
        clock: Clock | None = None,
        kind: GatewayKind = "spec",
    ) -> None:
        self._core = ClientCore(
            base_url,
            access_token,
            prefix=prefix,
            send_method=send_method,
            timeout=timeout,
            connect_retries=connect_retries,
            connect_retry_wait=connect_retry_wait,
            clock=clock,
            kind=kind,
        )
        options = self._core.http_options()
        self._http = httpx.Client(transport=transport, **options)
        # Sends take the cheaper httpcore path unless a transport was given (the test seam)
        # or the environment routes the gateway through a proxy.
        self._wire = (
            WireSender(
                options["base_url"],
                timeout=options["timeout"],
                limits=options["limits"],
                headers=options["headers"],
            )
            if transport is None and wire_usable(options["base_url"])
            else None
        )
        self._sleep: Callable[[float], None] = time.sleep

    def __repr__(self) -> str:
        return self._core.repr_for("GatewayClient")

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pools."""
        self._http.close()
        if self._wire is not None:
            self._wire.close()

    @property
    def base_url(self) -> str:
        """``{base_url}/{prefix}/`` (without user info)."""
        return self._core.display_base()

    def _request(self, req: GatewayRequest) -> httpx.Response:
        args = self._core.httpx_arguments(req)
        for attempt in Retrying(sleep=self._sleep, **self._core.retrying_kwargs()):
            with attempt:
                return self._http.request(**args)
        raise AssertionError("unreachable")  # pragma: no cover

    def _send_request(self, req: GatewayRequest) -> httpx.Response | WireResponse:
        wire = self._wire
        if wire is None:
            return self._request(req)
        args = self._core.httpx_arguments(req)
        for attempt in Retrying(sleep=self._sleep, **self._core.retrying_kwargs()):
            with attempt:
                return wire.request(args["method"], req.endpoint, args["params"], args.get("json"))
        raise AssertionError("unreachable")  # pragma: no cover

    def send(self, instance_id: str, to: str, message: Message) -> SendOutcome:
        """Send ``message`` to a phone number or a group (``...@g.us``) through an instance.

        Never raises for network, HTTP or gateway problems; raises
        :class:`RequestValidationError` naming the field for bad input (before any I/O).
        """
        req = self._core.build_send(instance_id, to, message)
        try:
            response = self._send_request(req)
        except httpx.HTTPError as exc:
            return self._core.transport_outcome(exc)
        return self._core.send_outcome(response, req)

    @property
    def capabilities(self) -> Capabilities:
        """What the gateway offers beyond sending (decision 68)."""
        return self._core.capabilities

    def check_numbers(self, instance_id: str, numbers: list[str]) -> dict[str, bool]:
        """Whether each of ``numbers`` (phone numbers in any usual format) is on the app,
        asked through ``instance_id`` in one request: ``{number as given: on the app}``,
        the numbers the gateway did not answer for left out. Raises
        :class:`GatewayError` when the gateway has no such check, refuses or cannot be
        reached."""
        if not self.capabilities.number_check:
            raise GatewayError(
                OutcomeKind.PERMANENT, None, "check_numbers: this gateway has no number check"
            )
        req = self._core.number_check_request(instance_id, numbers)
        try:
            response = self._request(req)
        except httpx.HTTPError as exc:
            raise self._core.instance_error("check_numbers", exc) from None
        answers = self._core.number_check_answers(response)
        out: dict[str, bool] = {}
        for number in numbers:
            digits = "".join(ch for ch in number if ch.isdigit())
            if digits in answers:
                out[number] = answers[digits]
        return out

    def show_typing(self, instance_id: str, to: str, seconds: float) -> bool:
        """Show ``to`` that the sender is typing for ``seconds`` (the request answers
        after them); False when the gateway has no typing, refused or was not reached
        (a send never depends on it)."""
        if not self.capabilities.typing or seconds <= 0:
            return False
        req = self._core.typing_request(instance_id, to, seconds)
        try:
            response = self._request(req)
        except httpx.HTTPError:
            return False
        return 200 <= response.status_code < 300

    def _operation(
        self, operation: str, instance_id: str | None = None, **extra: str
    ) -> Mapping[str, Any]:
        core = self._core
        first, second = core.instance_methods(operation)
        core.build_operation(operation, instance_id, first, extra)  # validate before I/O
        for method in (first, second):
            req = core.build_operation(operation, instance_id, method, extra)
            try:
                response = self._request(req)
            except httpx.HTTPError as exc:
                raise core.instance_error(operation, exc) from None
            if response.status_code in _FALLBACK_STATUSES and method == first and core.falls_back:
                continue
            if response.status_code not in _FALLBACK_STATUSES:
                core.remember(operation, method)
            return core.instance_doc(operation, response)
        raise AssertionError("unreachable")  # pragma: no cover

    def create_instance(self) -> str:
        """Create an instance; the new instance_id (the same one while one is unscanned)."""
        doc = self._operation("create_instance")
        instance_id = instance_id_of(doc)
        if instance_id is None:
            raise missing_field_error("create_instance", "instance_id")
        return instance_id

    def get_qrcode(self, instance_id: str) -> QrCodeResult:
        """Ask for the login QR code (synchronous data URI, or None when sent via webhook)."""
        doc = self._operation("get_qrcode", instance_id)
        return qr_result(doc)

    def set_webhook(self, instance_id: str, url: str, enable: bool = True) -> None:
        """Register (or, with ``enable=False``, disable) the webhook of an instance."""
        self._operation(
            "set_webhook", instance_id, webhook_url=url, enable="true" if enable else "false"
        )

    def reboot(self, instance_id: str) -> None:
        """Log the instance out of the web client and start a new scan."""
        self._operation("reboot", instance_id)

    def reconnect(self, instance_id: str) -> None:
        """Restart the connection to the web client after a connection loss."""
        self._operation("reconnect", instance_id)

    def logout(self, instance_id: str) -> None:
        """Log the instance out of the web client."""
        self._operation("logout", instance_id)

    def reset_instance(self, instance_id: str) -> str:
        """Reset the instance; the NEW instance_id when the gateway returns one, else the old."""
        doc = self._operation("reset_instance", instance_id)
        return instance_id_of(doc) or instance_id.strip()


def missing_field_error(operation: str, field: str) -> GatewayError:
    return GatewayError(
        OutcomeKind.AMBIGUOUS, None, f"{operation}: the gateway answered success without {field}"
    )


def qr_result(doc: Mapping[str, Any]) -> QrCodeResult:
    message = doc.get("message")
    return QrCodeResult(
        data_uri=qr_data_uri_of(doc), message=message if isinstance(message, str) else ""
    )


__all__ = ["GatewayClient", "QrCodeResult"]
