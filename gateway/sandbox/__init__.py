"""A faithful local emulator of the messaging gateway (both dialects), for tests, demo, benches.

```python
from gateway.sandbox import SandboxConfig, run_sandbox_in_thread
with run_sandbox_in_thread(SandboxConfig(dialect="reference")) as sb:
    iid = sb.create_linked_instance()
    ...  # talk to sb.url with sb.access_token; inspect sb.state or /sandbox/...
```
"""

from gateway.sandbox.config import Dialect, SandboxConfig
from gateway.sandbox.runner import Sandbox, run_sandbox_in_thread, wait_for_sandbox
from gateway.sandbox.server import SandboxApp, create_sandbox_app
from gateway.sandbox.sink import WebhookSink
from gateway.sandbox.state import GatewayRefusal, SandboxState

__all__ = [
    "Dialect",
    "GatewayRefusal",
    "Sandbox",
    "SandboxApp",
    "SandboxConfig",
    "SandboxState",
    "WebhookSink",
    "create_sandbox_app",
    "run_sandbox_in_thread",
    "wait_for_sandbox",
]
