"""One TLS context per process for the HTTP clients gatecast makes.

httpx builds a new :class:`ssl.SSLContext` for every client by default, loading the CA
bundle each time: about 0.2 s of CPU on a loaded machine, paid by every command that
makes a gateway client, every sandbox (one client per webhook worker) and every pass of
the outbound webhooks. The context is the same each time (the environment's CA bundle,
``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` honoured as httpx does), and one context serves any
number of clients and threads, so it is built once, when first needed.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def client_ssl_context() -> ssl.SSLContext:
    """The verifying TLS context every client of this process shares (built once)."""
    return httpx.create_ssl_context()
