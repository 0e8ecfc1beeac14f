"""Derived images: which are stale (the rule every backend's reap shares), and
``SandboxSpec.start_script``, the derivation run in each sandbox where no image is kept
(on the local backend here; docker and k8s run their own tests of it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchgym_sandbox import DerivedImage, DeriveFailed, SandboxSpec, create_backend
from patchgym_sandbox import labels as L
from patchgym_sandbox.derived import DERIVED_FROM, derived_labels, stale

NOW = 1_000_000.0


def image(
    ref: str, src: str, sid: str, now: str | None, created: float, **kw: object
) -> DerivedImage:
    labels = derived_labels(src, sid, f"script of {ref}", now=created)
    return DerivedImage(ref=ref, labels=labels, source_now=now, **kw)  # type: ignore[arg-type]


def test_stale_picks_repulled_gone_superseded_and_old_never_in_use_or_foreign() -> None:
    images = [
        image("current", "a:1", "sha256:a", "sha256:a", NOW - 10),
        image("superseded", "a:1", "sha256:a", "sha256:a", NOW - 20),
        image("repulled", "b:1", "sha256:b", "sha256:b2", NOW - 10),
        image("gone", "c:1", "sha256:c", None, NOW - 10),
        image("old-but-used", "d:1", "sha256:d", "sha256:d", NOW - 10, in_use=True),
        image("stale-but-used", "b:1", "sha256:b", "sha256:b2", NOW - 10, in_use=True),
        DerivedImage(ref="foreign", labels={DERIVED_FROM: "sha256:e"}, source_now=None),
        DerivedImage(ref="not-derived", labels={L.MANAGED: "true"}, source_now=None),
    ]
    picked = stale(images, now=NOW)
    assert set(picked) == {"superseded", "repulled", "gone"}, picked
    assert "newer derivation" in picked["superseded"] and "gone" in picked["gone"]
    aged = stale(images, older_than_s=5, now=NOW)
    assert set(aged) == {"current", "superseded", "repulled", "gone"}
    assert stale(images, older_than_s=60, now=NOW) == picked


@pytest.fixture
def template(tmp_path: Path) -> Path:
    root = tmp_path / "tpl"
    root.mkdir()
    (root / "f.txt").write_text("future\n")
    return root


async def test_start_script_runs_once_before_the_sandbox_is_handed_out(
    tmp_path: Path, template: Path
) -> None:
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    script = 'echo base > f.txt; echo ran >> runs.txt; echo "$PG_X" > env.txt'
    spec = SandboxSpec(template=str(template), start_script=script, env={"PG_X": "spec env"})
    try:
        async with backend.sandbox(spec) as box:
            assert (await box.read_text("f.txt")) == "base\n"
            assert (await box.read_text("env.txt")) == "spec env\n"
            await box.start()  # idempotent: no second run
            assert (await box.exec("cat runs.txt")).stdout == "ran\n"
    finally:
        await backend.aclose()


async def test_a_failing_start_script_fails_the_start_and_leaves_nothing(
    tmp_path: Path, template: Path
) -> None:
    backend = create_backend({"type": "local", "state_dir": str(tmp_path / "s")})
    spec = SandboxSpec(template=str(template), start_script="echo no base here >&2; exit 4")
    box = backend.sandbox(spec)
    try:
        with pytest.raises(DeriveFailed, match=r"exit 4.*no base here"):
            await box.start()
        assert box.closed and await backend.list_sandboxes() == []
    finally:
        await backend.aclose()
