"""The asynchronous gateway client: the same operations and results as
:class:`gateway.client.GatewayClient`, on ``httpx.AsyncClient``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx
from tenacity import AsyncRetrying

from gateway.classify import instance_id_of
from gateway.client import (
    ClientCore,
    Clock,
    QrCodeResult,
    missing_field_error,
    qr_result,
)
from gateway.dialects import GatewayKind
from gateway.messages import Message
from gateway.outcomes import SendOutcome
from gateway.requests import GatewayRequest, Prefix, SendMethod

_FALLBACK_STATUSES = (404, 405)


class AsyncGatewayClient:
    """An asynchronous client of one gateway (one base URL, prefix and access token)."""

    def __init__(
        self,
        base_url: str,
        access_token: str,
        *,
        prefix: Prefix = "api",
        send_method: SendMethod = "get",
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
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
        self._http = httpx.AsyncClient(transport=transport, **self._core.http_options())
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def __repr__(self) -> str:
        return self._core.repr_for("AsyncGatewayClient")

    async def __aenter__(self) -> AsyncGatewayClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    close = aclose

    @property
    def base_url(self) -> str:
        """``{base_url}/{prefix}/`` (without user info)."""
        return self._core.display_base()

    async def _request(self, req: GatewayRequest) -> httpx.Response:
        args = self._core.httpx_arguments(req)
        async for attempt in AsyncRetrying(sleep=self._sleep, **self._core.retrying_kwargs()):
            with attempt:
                return await self._http.request(**args)
        raise AssertionError("unreachable")  # pragma: no cover

    async def send(self, instance_id: str, to: str, message: Message) -> SendOutcome:
        """Send ``message`` (see :meth:`gateway.client.GatewayClient.send`)."""
        req = self._core.build_send(instance_id, to, message)
        try:
            response = await self._request(req)
        except httpx.HTTPError as exc:
            return self._core.transport_outcome(exc)
        return self._core.send_outcome(response, req)

    async def _operation(
        self, operation: str, instance_id: str | None = None, **extra: str
    ) -> Mapping[str, Any]:
        core = self._core
        first, second = core.instance_methods(operation)
        core.build_operation(operation, instance_id, first, extra)  # validate before I/O
        for method in (first, second):
            req = core.build_operation(operation, instance_id, method, extra)
            try:
                response = await self._request(req)
            except httpx.HTTPError as exc:
                raise core.instance_error(operation, exc) from None
            if response.status_code in _FALLBACK_STATUSES and method == first and core.falls_back:
                continue
            if response.status_code not in _FALLBACK_STATUSES:
                core.remember(operation, method)
            return core.instance_doc(operation, response)
        raise AssertionError("unreachable")  # pragma: no cover

    async def create_instance(self) -> str:
        """Create an instance; the new instance_id."""
        doc = await self._operation("create_instance")
        instance_id = instance_id_of(doc)
        if instance_id is None:
            raise missing_field_error("create_instance", "instance_id")
        return instance_id

    async def get_qrcode(self, instance_id: str) -> QrCodeResult:
        """Ask for the login QR code (data URI, or None when it comes via webhook)."""
        return qr_result(await self._operation("get_qrcode", instance_id))

    async def set_webhook(self, instance_id: str, url: str, enable: bool = True) -> None:
        """Register (or disable) the webhook of an instance."""
        await self._operation(
            "set_webhook", instance_id, webhook_url=url, enable="true" if enable else "false"
        )

    async def reboot(self, instance_id: str) -> None:
        """Log the instance out of the web client and start a new scan."""
        await self._operation("reboot", instance_id)

    async def reconnect(self, instance_id: str) -> None:
        """Restart the connection to the web client after a connection loss."""
        await self._operation("reconnect", instance_id)

    async def logout(self, instance_id: str) -> None:
        """Log the instance out of the web client."""
        await self._operation("logout", instance_id)

    async def reset_instance(self, instance_id: str) -> str:
        """Reset the instance; the NEW instance_id when the gateway returns one, else the old."""
        doc = await self._operation("reset_instance", instance_id)
        return instance_id_of(doc) or instance_id.strip()


__all__ = ["AsyncGatewayClient"]
