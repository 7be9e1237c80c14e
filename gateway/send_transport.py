"""The send hot path on httpcore directly: same connection pool and wire as httpx, less work.

``httpx.Client.request(..., params=...)`` parses and re-validates the whole URL three times
per request (a Python-level check of every character, and the message text rides in the
query string), then wraps the answer in its ``Response`` model: about half of the CPU of a
send. :class:`WireSender` builds the request target once from pre-encoded parts and hands it
to the same ``httpcore.ConnectionPool`` httpx itself would use (same limits, keep-alive
expiry, TLS context and timeouts), and maps httpcore's exceptions to httpx's, so outcome
classification and the retry policy see exactly what they would see through httpx.

It is used only where it behaves like httpx: the default transport, an ``http``/``https``
gateway URL, and no proxy from the environment (:func:`wire_usable`); otherwise the client
stays on httpx.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
import urllib.request
import zlib
from collections.abc import Mapping
from typing import Any

import httpcore
import httpx

from gateway.tls import client_ssl_context

# httpcore's exceptions and the httpx ones that httpx's own transport raises for them, most
# specific first (the first isinstance match wins).
_EXCEPTIONS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


def as_httpx_error(exc: Exception) -> httpx.HTTPError | None:
    """The httpx exception httpx would raise for httpcore's ``exc`` (None: not httpcore's)."""
    for source, target in _EXCEPTIONS:
        if isinstance(exc, source):
            return target(str(exc))
    return None


def wire_usable(base_url: str) -> bool:
    """True when requests to ``base_url`` may bypass httpx: http(s), and no proxy applies.

    httpx honours ``HTTP(S)_PROXY`` / ``ALL_PROXY`` / ``NO_PROXY``; rather than re-implement
    that, a gateway that would be reached through a proxy keeps the httpx path.
    """
    url = httpx.URL(base_url)
    if url.scheme not in ("http", "https"):
        return False
    proxies = urllib.request.getproxies()
    if not (proxies.get(url.scheme) or proxies.get("all")):
        return True
    return bool(urllib.request.proxy_bypass(url.host))


class WireResponse:
    """Status, headers (lower-case names) and body of one answer."""

    __slots__ = ("content", "headers", "status_code")

    def __init__(self, status_code: int, headers: Mapping[str, str], content: bytes) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content


class WireSender:
    """Requests to one gateway base URL over one httpcore connection pool (thread-safe)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: httpx.Timeout,
        limits: httpx.Limits,
        headers: Mapping[str, str],
    ) -> None:
        url = httpx.URL(base_url)
        self._scheme = url.raw_scheme
        self._host = url.raw_host
        self._port = url.port
        self._path = url.raw_path.split(b"?", 1)[0]
        if not self._path.endswith(b"/"):
            self._path += b"/"
        header_list = [(b"Host", url.netloc)]
        header_list += [(k.encode("ascii"), v.encode("latin-1")) for k, v in headers.items()]
        if url.userinfo:
            user = urllib.parse.unquote(url.username)
            password = urllib.parse.unquote(url.password or "")
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            header_list.append((b"Authorization", f"Basic {token}".encode("ascii")))
        self._headers = header_list
        self._extensions = {
            "timeout": {
                "connect": timeout.connect,
                "read": timeout.read,
                "write": timeout.write,
                "pool": timeout.pool,
            }
        }
        ssl_context = client_ssl_context() if self._scheme == b"https" else None
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
            retries=0,
        )

    def close(self) -> None:
        """Close every pooled connection."""
        self._pool.close()

    def request(
        self,
        method: str,
        endpoint: str,
        params: Mapping[str, str],
        json_body: Mapping[str, Any] | None = None,
    ) -> WireResponse:
        """One request to ``{base}{endpoint}?{params}``; raises httpx's exceptions."""
        target = self._path + endpoint.encode("ascii")
        if params:
            query = urllib.parse.urlencode(params, quote_via=urllib.parse.quote)
            target += b"?" + query.encode("ascii")
        headers = self._headers
        content: bytes | None = None
        if json_body is not None:
            # The bytes httpx writes for ``json=``: compact, UTF-8, no NaN.
            content = json.dumps(
                json_body, ensure_ascii=False, separators=(",", ":"), allow_nan=False
            ).encode("utf-8")
            headers = [
                *headers,
                (b"Content-Length", str(len(content)).encode("ascii")),
                (b"Content-Type", b"application/json"),
            ]
        url = httpcore.URL(scheme=self._scheme, host=self._host, port=self._port, target=target)
        try:
            answer = self._pool.request(
                method.encode("ascii"),
                url,
                headers=headers,
                content=content,
                extensions=self._extensions,
            )
        except Exception as exc:
            mapped = as_httpx_error(exc)
            if mapped is None:
                raise
            raise mapped from exc
        names = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in answer.headers
        }
        body = _decoded(answer.content, names.get("content-encoding", ""))
        return WireResponse(answer.status, names, body)


def _decoded(content: bytes, encoding: str) -> bytes:
    """The body without a ``gzip``/``deflate`` content coding (none is asked for, but a
    gateway may send one anyway); an undecodable body stays as it came."""
    coding = encoding.strip().lower()
    if coding not in ("gzip", "deflate", "x-gzip"):
        return content
    try:
        if coding == "deflate":
            try:
                return zlib.decompress(content)
            except zlib.error:
                return zlib.decompress(content, -zlib.MAX_WBITS)
        return zlib.decompress(content, zlib.MAX_WBITS | 16)
    except zlib.error:
        return content


__all__ = ["WireResponse", "WireSender", "as_httpx_error", "wire_usable"]
