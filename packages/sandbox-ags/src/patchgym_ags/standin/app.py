"""The stand-in as one ASGI app: control plane, envd HTTP routes and envd's Connect services.

Every sandbox is served on the same origin; envd requests name their sandbox with the
``E2b-Sandbox-Id`` header the SDK sends (as the E2B edge proxy routes them) and must carry
the sandbox's ``X-Access-Token``.
"""

from __future__ import annotations

import json
from typing import Any

from e2b.envd.filesystem.filesystem_connect import FilesystemASGIApplication
from e2b.envd.process.process_connect import ProcessASGIApplication
from starlette.applications import Starlette

from patchgym_ags.standin.config import StandinConfig
from patchgym_ags.standin.control import ControlPlane
from patchgym_ags.standin.files_api import FilesApi
from patchgym_ags.standin.filesystem_service import FilesystemService
from patchgym_ags.standin.process_service import ProcessService
from patchgym_ags.standin.state import Registry

Scope = dict[str, Any]


async def _plain_error(send: Any, status: int, message: str) -> None:
    body = json.dumps({"code": status, "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


class StandinApp:
    def __init__(self, config: StandinConfig | None = None) -> None:
        self.config = config or StandinConfig()
        self.registry = Registry(self.config)
        self.control = ControlPlane(self.registry)
        self.rest = Starlette(routes=[*self.control.routes(), *FilesApi(self.registry).routes()])
        self.rpc: dict[str, Any] = {
            "/process.Process/": ProcessASGIApplication(ProcessService(self.registry)),  # type: ignore[arg-type]  # connect-python's ASGI apps are typed for its generated service protocols
            "/filesystem.Filesystem/": FilesystemASGIApplication(FilesystemService(self.registry)),  # type: ignore[arg-type]  # connect-python's ASGI apps are typed for its generated service protocols
        }

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            for prefix, app in self.rpc.items():
                if path.startswith(prefix):
                    headers = dict(scope.get("headers") or [])
                    sid = headers.get(b"e2b-sandbox-id", b"").decode()
                    sbx = self.registry.sandboxes.get(sid)
                    if sbx is None:
                        return await _plain_error(send, 502, f"The sandbox {sid} was not found")
                    if headers.get(b"x-access-token", b"").decode() != sbx.access_token:
                        return await _plain_error(send, 401, "invalid or missing access token")
                    if self.config.faults.ignore_deadlines:
                        scope = {
                            **scope,
                            "headers": [
                                (k, v) for k, v in scope["headers"] if k != b"connect-timeout-ms"
                            ],
                        }
                    await app(scope, receive, send)
                    return
        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        await self.rest(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await self.registry.close()
                await send({"type": "lifespan.shutdown.complete"})
                return
