"""Fault injection against the stand-in: throttling, lost sandboxes, ignored deadlines, secrets."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Iterator
from importlib.metadata import version
from typing import Any

import e2b
import pytest
from conftest import API_KEY
from packaging.version import Version

from patchgym_ags.backend import AgsBackend
from patchgym_ags.config import E2bConfig
from patchgym_ags.standin.config import Faults
from patchgym_sandbox import labels as L
from patchgym_sandbox.errors import ConfigError, ImageNotFound, InfraError, RateLimited, SandboxLost
from patchgym_sandbox.registry import create_backend
from patchgym_sandbox.spec import SandboxSpec

SDK = Version(version("e2b"))


def config(standin: Any, **extra: Any) -> dict[str, Any]:
    return {
        "type": "e2b",
        "api_key": API_KEY,
        "api_url": standin.url,
        "sandbox_url": standin.url,
        "template": "base",
        "create_retry": {"attempts": 9, "base_s": 0.05},
        **extra,
    }


@pytest.fixture
def faults(standin: Any) -> Iterator[Faults]:
    standin.app.config.faults = Faults()
    yield standin.app.config.faults
    standin.app.config.faults = Faults()


@pytest.fixture
async def backend(standin: Any) -> AsyncIterator[AgsBackend]:
    b = create_backend(config(standin))
    assert isinstance(b, AgsBackend)
    yield b
    await b.aclose()


def creates_since(standin: Any, start: int) -> list[dict[str, Any]]:
    return [
        r
        for r in standin.app.control.requests[start:]
        if r["method"] == "POST" and r["path"].endswith("/sandboxes")
    ]


async def test_rate_limited_create_honours_retry_after(
    standin: Any, faults: Faults, backend: AgsBackend
) -> None:
    faults.create_rate_limited, faults.retry_after_s = 2, 1
    mark = len(standin.app.control.requests)
    async with backend.sandbox(SandboxSpec()) as sb:
        assert (await sb.exec("echo up")).stdout == "up\n"
    creates = creates_since(standin, mark)
    assert len(creates) == 3, creates
    gaps = [b["time"] - a["time"] for a, b in itertools.pairwise(creates)]
    assert all(g >= 0.9 for g in gaps), f"Retry-After: 1 not honoured, gaps {gaps}"
    if SDK >= Version("2.51"):
        keys = {c["idempotency_key"] for c in creates}
        assert keys == {sb.id}, "every attempt must carry the same Idempotency-Key"


async def test_throttling_beyond_sdk_retries_is_retried_by_us(
    standin: Any, faults: Faults, backend: AgsBackend
) -> None:
    faults.create_rate_limited, faults.retry_after_s = 7, 0
    async with backend.sandbox(SandboxSpec()) as sb:
        assert (await sb.exec("true")).exit_code == 0
    assert faults.create_rate_limited == 0


async def test_unavailable_then_success(standin: Any, faults: Faults, backend: AgsBackend) -> None:
    faults.create_unavailable = 5
    async with backend.sandbox(SandboxSpec()) as sb:
        assert (await sb.exec("true")).exit_code == 0


async def test_rate_limited_for_good_raises_typed_error(standin: Any, faults: Faults) -> None:
    faults.create_rate_limited, faults.retry_after_s = 100, 0
    b = create_backend(config(standin, create_retry={"attempts": 2, "base_s": 0.05}))
    with pytest.raises(RateLimited) as info:
        await b.sandbox(SandboxSpec()).start()
    assert API_KEY not in str(info.value)


async def test_sandbox_killed_mid_exec_is_lost(standin: Any, backend: AgsBackend) -> None:
    for via in ("execd", "envd", "commands"):
        b = create_backend(config(standin, exec_via=via))
        sb = b.sandbox(SandboxSpec())
        await sb.start()
        task = asyncio.create_task(sb.exec("echo started; sleep 60", timeout=120))
        await asyncio.sleep(1.0)
        rid = sb.remote_id  # type: ignore[attr-defined]
        await backend.remove(rid)
        with pytest.raises(SandboxLost):
            await asyncio.wait_for(task, 60)
        with pytest.raises(SandboxLost):
            await sb.exec("true")
        await sb.close()


async def test_in_sandbox_deadline_when_server_ignores_it(standin: Any, faults: Faults) -> None:
    faults.ignore_deadlines = True
    for via in ("execd", "envd", "commands"):
        b = create_backend(config(standin, exec_via=via))
        async with b.sandbox(SandboxSpec()) as sb:
            r = await sb.exec("sleep 30 & sleep 300", timeout=1.0)
            assert r.timed_out and r.exit_code == 124
            assert r.duration_s < 20


async def test_raw_sdk_deadline_depends_on_the_server(standin: Any, faults: Faults) -> None:
    """Why the supervisor exists: the SDK's own ``timeout`` is only enforced by envd."""
    sbx = await e2b.AsyncSandbox.create(
        template="base", api_key=API_KEY, api_url=standin.url, sandbox_url=standin.url
    )
    try:
        with pytest.raises(e2b.CommandExitException) as killed:
            await sbx.commands.run("sleep 8; echo finished", timeout=3)
        assert killed.value.exit_code == -1  # the stand-in honoured Connect-Timeout-Ms
        faults.ignore_deadlines = True
        # (the client's timeout only bounds opening the stream, which takes ms here)
        res = await sbx.commands.run("sleep 8; echo finished", timeout=3)
        assert res.exit_code == 0 and res.stdout == "finished\n"  # nothing stopped it
    finally:
        await sbx.kill()


async def test_unknown_template_or_image_is_image_not_found(standin: Any) -> None:
    b = create_backend(config(standin, create_retry={"attempts": 1}))
    with pytest.raises(ImageNotFound):
        await b.sandbox(SandboxSpec(template="no-such-tool")).start()
    ags = create_backend({**config(standin, create_retry={"attempts": 1}), "type": "ags"})
    with pytest.raises(ImageNotFound):
        await ags.sandbox(SandboxSpec(image="registry.example/missing:9")).start()


async def test_create_request_shape(standin: Any, backend: AgsBackend) -> None:
    mark = len(standin.app.control.requests)
    async with backend.sandbox(SandboxSpec(run_id="shape", lease_s=100, env={"A": "1"})) as sb:
        pass
    (create,) = creates_since(standin, mark)
    want_path = "/v2/sandboxes" if SDK >= Version("2.51") else "/sandboxes"
    assert create["path"] == want_path
    body = create["body"]
    assert body["templateID"] == "base" and body["timeout"] == 100 + 120
    assert body["envVars"] == {"A": "1"}
    assert body["metadata"][L.RUN_ID] == "shape" and body["metadata"][L.SANDBOX_ID] == sb.id
    if SDK >= Version("2.51"):
        assert create["idempotency_key"] == sb.id
    kills = [r for r in standin.app.control.requests[mark:] if r["method"] == "DELETE"]
    assert len(kills) == 1


async def test_ags_image_override_in_metadata(standin: Any) -> None:
    b = create_backend({**config(standin), "type": "ags", "image_registry_type": "personal",
                        "custom_config": {"resources": {"cpu": "1"}}})  # fmt: skip
    mark = len(standin.app.control.requests)
    async with b.sandbox(SandboxSpec(image="registry.example/task:1")) as sb:
        assert "template file" in (await sb.exec("cat README.txt")).stdout
    (create,) = creates_since(standin, mark)
    import json

    custom = json.loads(create["body"]["metadata"]["x-custom-config"])
    assert custom == {
        "image": "registry.example/task:1",
        "imageRegistryType": "personal",
        "resources": {"cpu": "1"},
    }


async def test_lease_renewed_while_in_use(standin: Any) -> None:
    b = create_backend(config(standin, lease_grace_s=0))
    async with b.sandbox(SandboxSpec(lease_s=5)) as sb:
        mark = len(standin.app.control.requests)
        r = await sb.exec("sleep 1; echo ok", timeout=30)
        assert r.ok
        renewals = [
            x for x in standin.app.control.requests[mark:] if x["path"].endswith("/timeout")
        ]
        assert renewals and renewals[0]["body"]["timeout"] >= 30


async def test_api_key_never_leaks(
    standin: Any, faults: Faults, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    faults.create_rate_limited, faults.retry_after_s = 4, 0
    cfg = E2bConfig.model_validate(config(standin))
    texts = [repr(cfg), str(cfg), cfg.model_dump_json()]
    b = cfg.build()
    texts.append(repr(b))
    async with b.sandbox(SandboxSpec()) as sb:
        texts.append(repr(sb))
        texts.append((await sb.exec("env")).output)
    wrong = "e2b_wrong-key-that-must-not-leak"
    bad = create_backend({**config(standin), "api_key": wrong, "create_retry": {"attempts": 1}})
    with pytest.raises(ConfigError) as info:
        await bad.sandbox(SandboxSpec()).start()
    texts += [str(info.value), repr(info.value)]
    with pytest.raises(ConfigError) as missing:
        create_backend({"type": "ags", "api_key_env": "PG_TEST_UNSET_KEY_VAR"})
    texts.append(str(missing.value))
    texts += [r.getMessage() for r in caplog.records]
    assert any("retry" in t for t in texts), "expected retry warnings in the captured logs"
    for t in texts:
        assert API_KEY not in t and wrong not in t


async def test_api_key_from_file(standin: Any, tmp_path: Any) -> None:
    key = tmp_path / "key"
    key.write_text(API_KEY + "\n")
    b = create_backend({**config(standin), "api_key": None, "api_key_file": str(key)})
    async with b.sandbox(SandboxSpec()) as sb:
        assert (await sb.exec("true")).ok


async def test_reap_uses_metadata_listing(standin: Any, backend: AgsBackend) -> None:
    sb = backend.sandbox(SandboxSpec(run_id="reap-me"))
    await sb.start()
    other = backend.sandbox(SandboxSpec(run_id="keep-me"))
    await other.start()
    assert [
        i.labels[L.SANDBOX_ID] for i in await backend.list_sandboxes({L.RUN_ID: "reap-me"})
    ] == [sb.id]
    assert await backend.reap({L.RUN_ID: "reap-me"}, expired=False)
    assert not await backend.list_sandboxes({L.RUN_ID: "reap-me"})
    assert len(await backend.list_sandboxes({L.RUN_ID: "keep-me"})) == 1
    await other.close()
    await sb.close()


async def test_execd_concurrent_commands_and_restart(standin: Any, backend: AgsBackend) -> None:
    async with backend.sandbox(SandboxSpec()) as sb:
        outs = await asyncio.gather(
            *(
                sb.exec(
                    f"for i in 1 2 3; do echo {n}-$i; echo e{n} >&2; sleep 0.05; done; exit {n}"
                )
                for n in range(12)
            )
        )
        for n, r in enumerate(outs):
            assert r.exit_code == n and r.stdout.split() == [f"{n}-1", f"{n}-2", f"{n}-3"]
            assert r.stderr.split() == [f"e{n}"] * 3
        with pytest.raises(InfraError):
            await sb.exec("pkill -f patchgym-execd; sleep 1")
        assert (await sb.exec("echo again")).stdout == "again\n"
