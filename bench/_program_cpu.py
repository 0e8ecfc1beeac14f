"""CPU by program, machine-wide, while a block runs: ``perf record -a`` (cpu-clock, 999 Hz).

Where a phase table says how long an episode waited, this says what the CPU did for it:
the driver (this process), the exec servers, ``git``, ``bash``, ``bwrap``, the test runs,
per episode, beside the floor's own programs, so the harness's cost is a list of programs
and milliseconds instead of one ratio. A side's samples are taken only while it runs
(``perf``'s control fifo enables and disables the events, each acknowledged: no fixed
wait). Needs ``perf`` and the right to sample every CPU (root, or
``kernel.perf_event_paranoid`` <= 0); :func:`unavailable` says why not.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from rich.table import Table

HZ = 999
START_S = 30.0
IDLE = "swapper"
"""The idle task: not a program's time."""
LEGEND = {
    "python": "this process (the driver; the floor's threads)",
    "python3": "the test runs (the eval script's python3)",
    "python3.11": "exec servers, serving (named after their interpreter)",
    "<digits>": "exec servers, starting (named after the loader's descriptor)",
}


def unavailable() -> str | None:
    """Why CPU by program cannot be sampled here, or None."""
    if shutil.which("perf") is None:
        return "perf is not installed (apt-get install linux-perf)"
    paranoid = Path("/proc/sys/kernel/perf_event_paranoid")
    level = int(paranoid.read_text()) if paranoid.exists() else 2
    if os.geteuid() != 0 and level > 0:
        return f"sampling every CPU needs root or kernel.perf_event_paranoid <= 0 (it is {level})"
    return None


class ProgramCpu:
    """Samples per program (``comm``), summed over the blocks of each side."""

    def __init__(self) -> None:
        self.samples: dict[str, Counter[str]] = {}
        self.episodes: Counter[str] = Counter()
        self.failed: str | None = None
        """Why a block went unsampled (perf did not start or answer), if one did."""

    @contextlib.contextmanager
    def sample(self, side: str) -> Iterator[None]:
        """Sample the block as ``side``'s (count its episodes in :attr:`episodes`). Where
        perf does not start or answer, the block runs unsampled (:attr:`failed` says why)."""
        with tempfile.TemporaryDirectory(prefix="pg-perf-") as tmp:
            ctl, ack, data = Path(tmp, "ctl"), Path(tmp, "ack"), Path(tmp, "perf.data")
            os.mkfifo(ctl)
            os.mkfifo(ack)
            perf = subprocess.Popen(
                ["perf", "record", "-a", "-q", "-F", str(HZ), "-e", "cpu-clock", "-D", "-1",
                 "--control", f"fifo:{ctl},{ack}", "-o", str(data)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )  # fmt: skip
            ack_fd = os.open(ack, os.O_RDONLY | os.O_NONBLOCK)
            ctl_fd, sampled = -1, False
            try:
                try:
                    ctl_fd = _open_writer(ctl, perf)
                    _command(ctl_fd, ack_fd, b"enable")
                    sampled = True
                except RuntimeError as exc:  # the measurement goes on without it
                    self.failed = str(exc)
                yield
                if sampled:
                    _command(ctl_fd, ack_fd, b"disable")
            except RuntimeError as exc:
                self.failed, sampled = str(exc), False
            finally:
                for fd in (ctl_fd, ack_fd):
                    if fd >= 0:
                        os.close(fd)
                if perf.poll() is None:
                    perf.send_signal(signal.SIGINT)
                perf.wait(timeout=120)
            if sampled:
                self.samples.setdefault(side, Counter()).update(_comms(data))

    def table(self, title: str) -> Table:
        """ms of CPU per episode by program, each side and the difference, largest first."""
        table = Table(
            title=title if self.failed is None else f"{title} (blocks unsampled: {self.failed})"
        )
        for col in ("program", "floor ms/ep", "ours ms/ep", "ours - floor"):
            table.add_column(col)
        per_ep = {
            side: {k: v / HZ * 1000 / max(1, self.episodes[side]) for k, v in counts.items()}
            for side, counts in self.samples.items()
        }
        floor, ours = per_ep.get("floor", {}), per_ep.get("ours", {})
        names = sorted(set(floor) | set(ours), key=lambda k: -max(floor.get(k, 0), ours.get(k, 0)))
        for name in names:
            f, o = floor.get(name, 0.0), ours.get(name, 0.0)
            if max(f, o) >= 0.5:
                table.add_row(name, f"{f:.1f}", f"{o:.1f}", f"{o - f:+.1f}")
        f_all, o_all = sum(floor.values()), sum(ours.values())
        table.add_row("all (busy CPU)", f"{f_all:.1f}", f"{o_all:.1f}", f"{o_all - f_all:+.1f}")
        return table


def _open_writer(fifo: Path, perf: subprocess.Popen[bytes]) -> int:
    """The control fifo opened for writing once ``perf`` reads it (or an error with its
    message if it exits first, or after :data:`START_S`)."""
    deadline = time.monotonic() + START_S
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader yet
            if perf.poll() is not None or time.monotonic() > deadline:
                err = perf.stderr.read().decode(errors="replace") if perf.stderr else ""
                raise RuntimeError(f"perf record did not start: {err.strip()[-500:]}") from None
            time.sleep(0.01)


def _command(ctl_fd: int, ack_fd: int, command: bytes) -> None:
    """Send ``command`` on the control fifo and wait for perf's ``ack``."""
    os.write(ctl_fd, command + b"\n")
    got = b""
    deadline = time.monotonic() + START_S
    while b"ack" not in got:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"perf did not acknowledge {command.decode()!r}")
        if select.select([ack_fd], [], [], left)[0]:
            got += os.read(ack_fd, 64)


def _comms(data: Path) -> Counter[str]:
    """Samples per program of a ``perf.data`` (idle left out; all-digit names, the exec
    servers before they name themselves, as one)."""
    out = subprocess.run(
        ["perf", "report", "-i", str(data), "--sort", "comm", "-n", "--stdio", "-q"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    counts: Counter[str] = Counter()
    for line in out.splitlines():
        fields = line.split(None, 2)
        if len(fields) < 3 or not fields[0].endswith("%"):
            continue
        name = fields[2].strip()
        if name != IDLE:
            counts["<digits>" if name.isdigit() else name] += int(fields[1])
    return counts
