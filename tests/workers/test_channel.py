"""The one worker channel (sidecar/workers/channel.py) against a fake worker (fake_worker.py): the handshake and
its timeout, requests multiplexed by id, streamed events, cancel, and every way a worker fails — each turned
into the domain's own error, never a bare exception."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.workers import channel as channel_mod
from sidecar.workers.channel import WorkerChannel, WorkerFault
from sidecar.workers.env import worker_env
from sidecar.workers.protocol import Delta, Error, Progress
from sidecar.workers.supervisor import ChildSupervisor

pytestmark = pytest.mark.anyio

FAKE = Path(__file__).with_name("fake_worker.py")
ROOT = str(Path(__file__).resolve().parents[2])


class DomainError(Exception):
    """What a domain makes of a failure: its own code (here ``FAKE_DOMAIN_FAILED`` for the worker's faults)."""

    def __init__(self, code: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason = code, reason


def on_fault(fault: WorkerFault) -> Exception:
    return DomainError("FAKE_DOMAIN_FAILED", fault.reason, fault.message)


def on_error(error: Error) -> Exception:
    return DomainError(error.code, str(error.details.get("reason")), error.message)


def env() -> Mapping[str, str]:
    return worker_env(os.environ, source_root=ROOT)


@asynccontextmanager
async def running(mode: str = "ok", **kwargs: Any) -> AsyncIterator[tuple[WorkerChannel, ChildSupervisor]]:
    children = ChildSupervisor()
    async with anyio.create_task_group() as tg:
        channel = WorkerChannel(
            children,
            tg,
            name="fake worker",
            argv=[sys.executable, str(FAKE), mode],
            env=env,
            on_fault=on_fault,
            on_error=on_error,
            **kwargs,
        )
        try:
            with anyio.fail_after(30):
                yield channel, children
        finally:
            await channel.aclose()
            await children.stop_all(0.5)
            assert children.pids == []


async def test_a_request_streams_its_events_then_returns_its_result() -> None:
    events: list[Progress | Delta] = []

    async def collect(event: Progress | Delta) -> None:
        events.append(event)

    async with running() as (channel, children):
        hello = await channel.start()
        assert hello.worker == "fake" and hello.pid == channel.pid and children.pids == [hello.pid]
        assert os.getpgid(hello.pid) == hello.pid  # its own process group
        assert await channel.request("stream", {"n": 3}, collect) == {"n": 3}
        assert [e.text for e in events if isinstance(e, Delta)] == ["t0 ", "t1 ", "t2 "]
        assert [e.data["i"] for e in events if isinstance(e, Progress)] == [0, 1, 2]
        assert await channel.request("echo", {"a": [1, "x"]}) == {"a": [1, "x"]}
        assert channel.starts == 1


async def test_requests_are_multiplexed_by_id() -> None:
    async with running() as (channel, _):
        held = anyio.Event()
        answers: dict[str, Any] = {}

        async def on_held(event: Progress | Delta) -> None:
            if isinstance(event, Progress) and event.stage == "held":
                held.set()

        async def hold() -> None:
            answers["held"] = await channel.request("hold", {"key": "a"}, on_held)

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold)
            await held.wait()
            # the first request is still open in the worker: a second one is answered before it
            assert await channel.request("echo", {"b": 2}) == {"b": 2}
            assert "held" not in answers
            assert await channel.request("release", {"key": "a", "value": 42}) == {}
        assert answers["held"] == {"value": 42}


async def test_the_worker_s_error_becomes_the_domain_s_error_and_the_worker_stays() -> None:
    async with running() as (channel, _):
        pid = (await channel.start()).pid
        with pytest.raises(DomainError) as info:
            await channel.request("fail", {"code": "FAKE_BAD_INPUT"})
        assert (info.value.code, info.value.reason) == ("FAKE_BAD_INPUT", "FAKE")
        assert channel.pid == pid and await channel.request("echo", {}) == {}


async def test_a_cancelled_request_sends_a_cancel_and_the_channel_goes_on() -> None:
    async with running() as (channel, _):
        held = anyio.Event()

        async def on_held(event: Progress | Delta) -> None:
            held.set()

        scopes: list[anyio.CancelScope] = []

        async def hold() -> None:
            with anyio.CancelScope() as scope:  # cancelled from another task, as the dispatcher cancels a request
                scopes.append(scope)
                await channel.request("hold", {"key": "c"}, on_held)

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold)
            await held.wait()
            scopes[0].cancel()
        cancelled = await channel.request("cancelled", {})
        assert len(cancelled["ids"]) == 1  # the worker got the cancel of that request
        assert channel.starts == 1 and await channel.request("echo", {"after": True}) == {"after": True}


async def test_a_worker_that_hangs_at_start_fails_with_the_domain_code() -> None:
    async with running("hang", hello_timeout_s=0.5) as (channel, children):
        with pytest.raises(DomainError) as info:
            await channel.request("echo", {})
        assert (info.value.code, info.value.reason) == ("FAKE_DOMAIN_FAILED", channel_mod.START_TIMEOUT)
        assert channel.pid is None and children.pids == []  # the hung worker was stopped


async def test_a_worker_that_exits_at_start_fails_with_the_domain_code() -> None:
    async with running("exit") as (channel, children):
        with pytest.raises(DomainError) as info:
            await channel.request("echo", {})
        assert (info.value.code, info.value.reason) == ("FAKE_DOMAIN_FAILED", channel_mod.START_FAILED)
        assert "exited with status 5" in str(info.value) and children.pids == []


@pytest.mark.parametrize("mode", ["noise", "oldproto"])
async def test_a_worker_that_breaks_the_protocol_before_its_hello_did_not_start(mode: str) -> None:
    async with running(mode) as (channel, children):
        with pytest.raises(DomainError) as info:
            await channel.request("echo", {})
        assert (info.value.code, info.value.reason) == ("FAKE_DOMAIN_FAILED", channel_mod.START_FAILED)
        assert "loading" not in str(info.value) and channel.pid is None and children.pids == []


async def test_a_garbage_line_fails_the_request_and_the_next_one_gets_a_fresh_worker() -> None:
    async with running() as (channel, children):
        first = (await channel.start()).pid
        with pytest.raises(DomainError) as info:
            await channel.request("garbage", {})
        assert (info.value.code, info.value.reason) == ("FAKE_DOMAIN_FAILED", channel_mod.PROTOCOL_ERROR)
        assert "this is not" not in str(info.value)  # what the worker printed is logged, never shown
        assert first not in children.pids
        assert await channel.request("echo", {"x": 1}) == {"x": 1}
        assert channel.starts == 2 and channel.pid != first


async def test_a_request_that_could_not_be_written_goes_to_a_fresh_worker() -> None:
    """A worker gone while idle, before its reader saw the EOF: the request never reached it, so it is not failed
    (issue 22: an export after its worker was killed between exports failed now and then)."""
    async with running() as (channel, children):
        assert await channel.request("deaf", {}) == {}
        first = channel.pid
        assert await channel.request("echo", {"x": 1}) == {"x": 1}
        assert channel.starts == 2 and channel.pid != first and first not in children.pids


def _wait_exited_blocking(pid: int) -> None:
    """Until ``pid`` is a zombie or gone (reaped by asyncio's watcher thread, unknown to the loop yet), without a
    loop turn: its reader cannot see the EOF meanwhile."""
    import time

    deadline = time.monotonic() + 10
    stat = Path(f"/proc/{pid}/stat")
    while stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.005)


async def test_a_worker_that_died_while_idle_is_replaced_before_the_next_request() -> None:
    """Killed between requests and not yet seen by its reader (a zombie): the next request goes to a new worker;
    asyncio reports the broken pipe of a write only a loop turn later, so writing first would lose the request."""
    import signal

    async with running() as (channel, _children):
        first = (await channel.start()).pid
        os.kill(first, signal.SIGKILL)
        _wait_exited_blocking(first)
        assert await channel.request("echo", {"x": 1}) == {"x": 1}
        assert channel.starts == 2 and channel.pid != first


async def test_a_crash_mid_request_fails_every_request_in_flight(caplog: pytest.LogCaptureFixture) -> None:
    async with running() as (channel, children):
        held = anyio.Event()
        failures: list[DomainError] = []

        async def on_held(event: Progress | Delta) -> None:
            held.set()

        async def hold() -> None:
            try:
                await channel.request("hold", {"key": "k"}, on_held)
            except DomainError as exc:
                failures.append(exc)

        with caplog.at_level(logging.WARNING, logger="sidecar.workers.channel"):
            async with anyio.create_task_group() as tg:
                tg.start_soon(hold)
                await held.wait()
                with pytest.raises(DomainError) as info:
                    await channel.request("crash", {})
        assert (info.value.code, info.value.reason) == ("FAKE_DOMAIN_FAILED", channel_mod.DIED)
        assert "exited with status 7" in str(info.value)
        assert [f.reason for f in failures] == [channel_mod.DIED]  # the other request in flight failed too
        assert children.pids == []
        assert "boom-marker" in caplog.text  # the tail of its stderr is in the log
        assert await channel.request("echo", {}) == {}  # started again


async def test_a_request_that_times_out_fails_with_the_domain_code() -> None:
    async with running() as (channel, children):
        pid = (await channel.start()).pid
        with pytest.raises(DomainError) as info:
            await channel.request("hold", {"key": "t"}, timeout_s=0.3)
        assert (info.value.code, info.value.reason) == ("FAKE_DOMAIN_FAILED", channel_mod.TIMEOUT)
        assert pid not in children.pids


async def test_stop_fails_what_is_in_flight_and_the_idle_timeout_stops_the_worker() -> None:
    async with running(idle_s=0.2) as (channel, children):
        assert await channel.request("echo", {}) == {}
        with anyio.fail_after(10):
            while channel.pid is not None or children.pids:  # noqa: ASYNC110 - the idle stop has no event to wait on
                await anyio.sleep(0.05)
        held = anyio.Event()

        async def on_held(event: Progress | Delta) -> None:
            held.set()

        async def hold() -> None:
            with pytest.raises(DomainError) as info:
                await channel.request("hold", {"key": "s"}, on_held)
            assert info.value.reason == channel_mod.STOPPED

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold)
            await held.wait()
            await channel.stop()
        assert channel.starts == 2 and children.pids == []


async def test_the_worker_gets_no_secret_and_telemetry_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METONA_SECRET_KEY", "master")
    monkeypatch.setenv("METONA_SECRET_KEY_FILE", "/keys/master")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("METONA_LIVE_DEEPSEEK_API_KEY", "x")
    monkeypatch.setenv("HF_TOKEN", "t")
    monkeypatch.setenv("METONA_FAKE_SETTING", "kept")
    async with running() as (channel, _):
        names = set((await channel.request("env", {}))["names"])
    assert not names & {"METONA_SECRET_KEY", "METONA_SECRET_KEY_FILE", "OPENAI_API_KEY", "HF_TOKEN"}
    assert "METONA_LIVE_DEEPSEEK_API_KEY" not in names
    assert {"METONA_FAKE_SETTING", "HF_HUB_OFFLINE", "PYANNOTE_METRICS_ENABLED"} <= names
