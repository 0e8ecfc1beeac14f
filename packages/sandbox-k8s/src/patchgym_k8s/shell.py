"""A ``bash -i`` on the pod's tty (exec with ``tty=True``) as a :class:`ShellChannel`.

One dedicated thread owns the websocket (reads and writes never race on the TLS
socket); ``write`` queues bytes and wakes it through a pipe. Closing ends the stream and
kills every process the shell started (they carry a token in their environment).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import select
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from patchgym_k8s import commands
from patchgym_k8s.execstream import ExecStream, StreamOpenError
from patchgym_sandbox.errors import InfraError, SessionError
from patchgym_sandbox.offload import run_blocking
from patchgym_sandbox.remote import SUPERVISOR_PATH, kill_foreground_argv
from patchgym_sandbox.session import SHELL_ARGV, SHELL_ENV, ShellChannel

if TYPE_CHECKING:
    from patchgym_k8s.sandbox import K8sSandbox

TOKEN_VAR = "PATCHGYM_SHELL"
CD_AND_EXEC = 'cd -- "$1" || exit 1; shift; exec "$@"'
KILL_TREE = (
    "import sys,importlib.util as u;s=u.spec_from_file_location('pgsup',sys.argv[1]);"
    "m=u.module_from_spec(s);s.loader.exec_module(m);m.kill_tree(None,sys.argv[2],sys.argv[3])"
)


class K8sShellChannel(ShellChannel):
    def __init__(self, sandbox: K8sSandbox, ws: ExecStream, token: str) -> None:
        super().__init__()
        self._sandbox = sandbox
        self._ws = ws
        self._token = token
        self._loop = asyncio.get_running_loop()
        self._outbox: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._stop = False
        self._thread = threading.Thread(
            target=self._pump, name=f"patchgym-k8s-shell-{sandbox.id}", daemon=True
        )
        self._thread.start()

    @classmethod
    async def open(cls, sandbox: K8sSandbox, cwd: str, env: Mapping[str, str]) -> K8sShellChannel:
        token = uuid.uuid4().hex
        assignments = [f"{k}={v}" for k, v in {**env, **SHELL_ENV, TOKEN_VAR: token}.items()]
        argv = ["env", *assignments, "sh", "-c", CD_AND_EXEC, "patchgym-shell", cwd, *SHELL_ARGV]
        backend = sandbox._backend
        cfg = backend.config

        def connect() -> ExecStream:
            return ExecStream(
                backend.api, sandbox.pod_name, cfg.container_name, argv, stdin=True, tty=True
            )

        try:
            ws = await asyncio.to_thread(connect)
        except StreamOpenError as exc:
            raise await sandbox._lost_or_async(
                InfraError(f"cannot open a shell in pod {sandbox.pod_name}: {exc}")
            ) from exc
        return cls(sandbox, ws, token)

    def _pump(self) -> None:
        ws = self._ws
        try:
            while not self._stop:
                if not ws.pending():
                    try:
                        ready, _, _ = select.select([ws.fileno(), self._wake_r], [], [], 1.0)
                    except (OSError, ValueError):
                        break
                else:
                    ready = [ws.fileno()]
                if self._wake_r in ready:
                    with contextlib.suppress(OSError):
                        os.read(self._wake_r, 4096)
                    while True:
                        try:
                            data = self._outbox.get_nowait()
                        except queue.Empty:
                            break
                        ws.send(0, data)
                if ws.fileno() in ready:
                    frame = ws.recv()
                    if frame is None:
                        break
                    if frame[1] and frame[0] in (1, 2):
                        self.feed_threadsafe(self._loop, frame[1])
        except Exception:  # a broken stream ends the session (EOF below)
            pass
        finally:
            ws.close()
            with contextlib.suppress(RuntimeError):
                self.feed_threadsafe(self._loop, b"")

    async def write(self, data: bytes) -> None:
        if self._stop or not self._thread.is_alive():
            raise SessionError("the shell session in the pod has ended")
        self._outbox.put(data)
        os.write(self._wake_w, b"x")

    async def kill_foreground(self) -> None:
        """SIGKILL the shell's foreground job: through the pod's exec server when it runs,
        else one exec of the supervisor's ``kill_foreground``."""
        server = self._sandbox._server_slot.current
        if server is not None and await server.kill_foreground(TOKEN_VAR, self._token):
            return
        await self._sandbox._backend.call(self._exec_in_pod, kill_foreground_argv)

    async def close(self) -> None:
        if self._stop:
            return
        self._stop = True
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        await run_blocking(self._thread.join, 5.0)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        await self._sandbox._backend.call(self._exec_in_pod, _kill_tree_argv)

    def _exec_in_pod(self, argv_for: Callable[[str, str, str, str], list[str]]) -> None:
        """Run ``argv_for(python, supervisor, var, token)`` in the pod, best effort: a kill
        of what the shell runs (its jobs carry the token)."""
        sb = self._sandbox
        argv = argv_for(sb._backend.config.python, SUPERVISOR_PATH, TOKEN_VAR, self._token)
        with contextlib.suppress(Exception):
            commands.run(
                sb._backend.api,
                sb.pod_name,
                sb._backend.config.container_name,
                argv,
                sink=lambda c, d: None,
                liveness_s=10,
            )


def _kill_tree_argv(python: str, supervisor: str, var: str, token: str) -> list[str]:
    return [python, "-I", "-S", "-c", KILL_TREE, supervisor, var, token]
