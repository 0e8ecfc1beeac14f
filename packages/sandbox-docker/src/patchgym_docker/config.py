"""Config of the ``docker`` backend (cheap to import: pydantic only, no Docker SDK)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from patchgym_sandbox.backend import BackendConfig
from patchgym_sandbox.retry import RetryPolicy

if TYPE_CHECKING:
    from patchgym_docker.backend import DockerBackend


DEFAULT_CAP_ADD = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL")

HOST_NAMESPACE_KEYS = ("pid_mode", "ipc_mode", "userns_mode", "uts_mode", "cgroupns")
ENGINE_SOCKET_HINTS = ("docker.sock", "containerd.sock", "crio.sock", "podman.sock")


def unsafe_host_config(extra: dict[str, Any]) -> str | None:
    """Why ``extra`` would hand the sandbox the host (None when it does not).

    Refused: ``privileged``, sharing a host namespace, device access, and any bind of an
    engine socket or of a directory that holds one (``/``, ``/run``, ``/var/run``, ``/var``).
    """
    if extra.get("privileged"):
        return "privileged=True gives the sandbox the host; it is refused"
    for key in HOST_NAMESPACE_KEYS:
        if str(extra.get(key, "")).startswith("host"):
            return f"{key}={extra[key]!r} shares a host namespace; it is refused"
    if extra.get("devices") or extra.get("device_cgroup_rules"):
        return "host devices are refused"
    sources: list[str] = []
    binds = extra.get("binds") or []
    if isinstance(binds, dict):
        sources += [str(k) for k in binds]
    else:
        sources += [str(b).split(":", 1)[0] for b in binds]
    for mount in extra.get("mounts") or []:
        sources.append(str(mount.get("Source") if isinstance(mount, dict) else mount))
    for src in sources:
        norm = "/" + src.strip("/")
        if any(h in src for h in ENGINE_SOCKET_HINTS) or norm in ("/", "/run", "/var/run", "/var"):
            return f"bind of {src!r} would expose a container engine socket; it is refused"
    return None


class DockerConfig(BackendConfig):
    """One container per sandbox on a Docker Engine (``DOCKER_HOST`` or the default socket)."""

    type: Literal["docker"] = "docker"
    base_url: str | None = None
    """Engine address (``unix:///var/run/docker.sock``, ``tcp://host:2376``); None = ``DOCKER_HOST``/default."""
    fixed_lease_s: float = Field(default=3600.0, gt=0)
    """Docker labels are fixed at creation, so a lease cannot be renewed: containers are
    stamped with at least this lease (an episode's budget), never the short renewable one."""
    api_version: str = "auto"
    """Engine API version to speak; ``auto`` asks the engine once (the SDK default may be too new)."""
    timeout_s: float = Field(default=60.0, gt=0)
    """Per-request timeout for Engine API calls (exec output streams are bounded by the exec deadline)."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Extra labels stamped on every container of this backend (owner, team, test session)."""
    network_mode: str = "none"
    """Network for sandboxes whose spec has ``network=False`` (the default): no network at all."""
    network_enabled_mode: str = "bridge"
    """Network for sandboxes whose spec asks for ``network=True``."""
    init: bool = True
    """Run the engine's init (tini/docker-init) as PID 1 so orphaned zombies are reaped."""
    keepalive_cmd: list[str] = Field(default_factory=lambda: ["sleep", "infinity"])
    """The container's main process; commands run next to it with ``docker exec``."""
    exec_mode: Literal["server", "exec"] = "server"
    """``server``: one long-lived in-container exec server per sandbox runs every command
    (a line each way per command); ``exec``: one ``docker exec`` of the supervisor per
    command. Both enforce the deadline and tree kill inside the container; ``server``
    falls back to ``exec`` when its server cannot start or a command asks for another user."""
    python: str = "python3"
    """Interpreter inside the image that runs the patchgym supervisor (stdlib only, 3.6+)."""
    pull: Literal["missing", "never"] = "missing"
    """What ``prepare(images)`` does about images the engine lacks. Sandbox creation never pulls."""
    show_progress: bool = True
    """Show a rich progress display on stderr during ``prepare``."""
    runtime: str | None = None
    """OCI runtime name (``runsc`` for gVisor, ...); None = the engine's default."""
    cap_drop: list[str] = Field(default_factory=lambda: ["ALL"])
    """Capabilities removed from the container's root; ``ALL`` by default, then ``cap_add``."""
    cap_add: list[str] = Field(default_factory=lambda: list(DEFAULT_CAP_ADD))
    """What root inside keeps: file ownership/permission overrides (installs, git, tar),
    changing uid/gid (``su``, apt's sandbox user) and signalling its own processes. No
    ``NET_RAW``, ``SYS_CHROOT``, ``MKNOD``, ``AUDIT_WRITE``, ``SETFCAP``."""
    no_new_privileges: bool = True
    """``--security-opt no-new-privileges``: setuid binaries and file caps grant nothing."""
    default_memory_mb: int | None = Field(default=4096, gt=0)
    """Memory (and swap) limit when the spec sets none; None = unlimited."""
    default_pids: int | None = Field(default=1024, gt=0)
    """Process/thread limit when the spec sets none (a fork bomb stops here); None = unlimited."""
    read_only_rootfs: bool = False
    """Mount the image read-only (the workdir then needs a volume or tmpfs in ``extra_host_config``)."""
    shm_size_mb: int | None = Field(default=None, gt=0)
    extra_host_config: dict[str, Any] = Field(default_factory=dict)
    """Extra keyword arguments for the SDK's ``create_host_config`` (e.g. ``{"tmpfs": {"/run": ""}}``)."""
    exec_grace_s: float = Field(default=30.0, gt=0)
    """Client-side slack past an exec's deadline before the call is abandoned as an infra failure."""
    max_threads: int = Field(default=128, gt=0)
    """Worker threads for the blocking SDK (one per running exec or file transfer)."""
    retry: RetryPolicy = Field(
        default_factory=lambda: RetryPolicy(attempts=4, base_s=0.1, max_s=2.0)
    )
    """Transient Engine API errors on idempotent calls (the shared policy, short delays)."""

    @field_validator("extra_host_config")
    @classmethod
    def _no_host_escape(cls, v: dict[str, Any]) -> dict[str, Any]:
        problem = unsafe_host_config(v)
        if problem is not None:
            raise ValueError(f"extra_host_config: {problem}")
        return v

    def build(self) -> DockerBackend:
        from patchgym_docker.backend import DockerBackend

        return DockerBackend(self)
