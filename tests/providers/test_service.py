"""ProviderService over the mock provider: records and write-only keys, retry, failover, cancel."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.config.service import ConfigService
from sidecar.core.errors import BadRequestError, ConflictError, NotFoundError
from sidecar.ir import (
    MetonaConstraints,
    MetonaErrorCode,
    MetonaGenerationParams,
    MetonaMessage,
    MetonaRequest,
    MetonaRequestMeta,
    MetonaStreamEvent,
    MetonaSystemPrompt,
)
from sidecar.providers.errors import ProviderError, phase2_code
from sidecar.providers.fallback import PROVIDER_SWITCHED
from sidecar.providers.service import ProviderService
from sidecar.storage.secrets import SecretStore
from sidecar.storage.sqlite import Database

pytestmark = pytest.mark.anyio

CANARY = "sk-CANARY-7f3a9c1e-do-not-leak"


def request(text: str = "hello", iteration: int = 1) -> MetonaRequest:
    return MetonaRequest(
        meta=MetonaRequestMeta(session_id="s1", iteration=iteration, request_id="r1", timestamp=1, agent_version="t"),
        system_prompt=MetonaSystemPrompt(role_definition="r", output_constraints="o", safety_guidelines="s"),
        messages=[MetonaMessage(role="user", content=text, timestamp=1)],
        params=MetonaGenerationParams(stream=True),
    )


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[tuple[ProviderService, ConfigService, Database]]:
    db = await Database.open(tmp_path / "data")
    secrets = await SecretStore.open(db, tmp_path / "master.key")
    config = ConfigService(db, secrets)
    await config.migrate()
    service = ProviderService(db, secrets, config, retry_base_s=0.001)
    await service.migrate()
    try:
        yield service, config, db
    finally:
        await service.close()
        await db.close()


def script(*turns: dict[str, Any]) -> dict[str, Any]:
    return {"script": {"turns": list(turns)}}


class Recorder:
    def __init__(self) -> None:
        self.events: list[MetonaStreamEvent] = []
        self.notes: list[tuple[str, Any]] = []

    async def emit(self, event: MetonaStreamEvent) -> None:
        self.events.append(event)

    async def notify(self, method: str, params: Any) -> None:
        self.notes.append((method, params))

    @property
    def types(self) -> list[str]:
        return [e.type.value for e in self.events]


async def test_crud_and_write_only_key(env: Any, tmp_path: Path) -> None:
    service, _config, _db = env
    created = await service.create(preset="deepseek", api_key=CANARY)
    assert created.provider_id == "deepseek"
    assert created.api_key_configured is True
    assert created.base_url == "https://api.deepseek.com"
    assert CANARY not in created.model_dump_json()
    second = await service.create(preset="deepseek", display_name="DS 2")
    assert second.provider_id == "deepseek-2" and second.api_key_configured is False
    with pytest.raises(ConflictError):
        await service.create(preset="deepseek", provider_id="deepseek")
    with pytest.raises(BadRequestError) as bad:
        await service.create(preset="nope")
    assert bad.value.code == "PROVIDER_PRESET_UNKNOWN"
    with pytest.raises(BadRequestError):
        await service.create(preset="openai", protocol="anthropic")
    agnes = await service.create(preset="agnes-ai", protocol="anthropic")
    assert agnes.base_url == "https://apihub.agnes-ai.com"

    updated = await service.update("deepseek", api_key="", default_model="deepseek-reasoner")
    assert updated.api_key_configured is False and updated.default_model == "deepseek-reasoner"
    await service.update("deepseek", api_key=CANARY)
    assert [p.provider_id for p in await service.list()] == ["deepseek", "deepseek-2", "agnes-ai"]
    await service.create(preset="mock", provider_id="keyed", api_key=CANARY)
    adapter = await service.adapter("keyed")
    assert adapter.config.api_key == CANARY  # in memory only
    assert CANARY not in repr(adapter.config)

    await service.delete("deepseek-2")
    with pytest.raises(NotFoundError) as missing:
        await service.get("deepseek-2")
    assert missing.value.code == "PROVIDER_NOT_FOUND"

    # nothing in the data directory holds the key in clear (the database, its WAL, anything else)
    for path in (tmp_path / "data").rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path


async def test_key_does_not_decrypt_under_another_name(env: Any) -> None:
    service, _config, db = env
    await service.create(preset="mock", provider_id="a", api_key=CANARY)
    await service.create(preset="mock", provider_id="b", api_key="sk-other")

    def swap(conn: sqlite3.Connection) -> None:
        row = conn.execute("SELECT nonce, ciphertext FROM secrets WHERE name = 'provider:a:api_key'").fetchone()
        conn.execute("UPDATE secrets SET nonce = ?, ciphertext = ? WHERE name = 'provider:b:api_key'", row)

    await db.run(swap)
    with pytest.raises(Exception) as exc:
        await service.adapter("b")
    assert getattr(exc.value, "code", None) == "SECRET_STORE_UNAVAILABLE"


async def test_stream_mock_text_reasoning_and_tools(env: Any) -> None:
    service, _config, _db = env
    await service.create(
        preset="mock",
        options=script(
            {"reasoning": "think first", "text": "你好，世界！", "chunk_chars": 3},
            {"tool_calls": [{"name": "read_file", "args": {"path": "a.txt"}}, {"name": "calc", "args": {"x": 1}}]},
        ),
    )
    rec = Recorder()
    response = await service.chat("mock", None, request(), emit=rec.emit)
    assert rec.types[0] == "thinking_start"
    assert rec.types[-2:] == ["usage", "done"]
    assert "thinking_end" in rec.types and rec.types.index("thinking_end") < rec.types.index("text_delta")
    assert [e.seq for e in rec.events] == list(range(len(rec.events)))
    assert response.content == "你好，世界！" and response.reasoning_content == "think first"
    assert response.finish_reason.value == "stop"

    rec2 = Recorder()
    response2 = await service.chat("mock", "mock-1", request(iteration=2), emit=rec2.emit)
    assert rec2.types.count("tool_call_complete") == 2
    assert [c.name for c in response2.tool_calls or []] == ["read_file", "calc"]
    assert response2.tool_calls[0].args == {"path": "a.txt"} and response2.tool_calls[0].iteration == 2
    assert response2.finish_reason.value == "tool_calls"


async def test_retry_then_success_is_invisible(env: Any) -> None:
    service, _config, _db = env
    await service.create(
        preset="mock",
        options=script({"text": "ok", "error": {"code": "rate_limited", "retryable": True, "times": 2}}),
    )
    rec = Recorder()
    response = await service.chat("mock", None, request(), emit=rec.emit, notify=rec.notify)
    assert response.content == "ok"
    assert rec.types == ["text_delta", "usage", "done"]
    assert rec.events[0].seq == 0
    assert rec.notes == []


async def test_retries_exhausted_without_fallback_returns_the_error(env: Any) -> None:
    service, config, _db = env
    await config.update({"llm.maxRetries": 1})
    await service.create(preset="mock", options=script({"text": "x", "error": {"code": "model_overloaded"}}))
    rec = Recorder()
    with pytest.raises(ProviderError) as exc:
        await service.chat("mock", None, request(), emit=rec.emit)
    assert exc.value.error.code is MetonaErrorCode.MODEL_OVERLOADED
    assert rec.types == ["error", "done"]
    assert phase2_code(exc.value.error) == ("PROVIDER_UNAVAILABLE", 503)


async def test_failover_announces_the_switch(env: Any) -> None:
    service, config, _db = env
    await service.create(
        preset="mock", provider_id="primary", options=script({"text": "x", "error": {"code": "network_error"}})
    )
    await service.create(preset="mock", provider_id="backup", options=script({"text": "from backup"}))
    await config.update({"llm.fallbackProvider": "backup", "llm.fallbackModel": "mock-1", "llm.maxRetries": 0})
    rec = Recorder()
    response = await service.chat("primary", None, request(), emit=rec.emit, notify=rec.notify)
    assert response.content == "from backup"
    assert response.meta.provider == "backup"
    assert rec.notes == [
        (
            PROVIDER_SWITCHED,
            {"from_provider": "primary", "to_provider": "backup", "model": "mock-1", "reason": "network_error"},
        )
    ]
    assert rec.types == ["text_delta", "text_delta", "usage", "done"]


async def test_no_failover_after_visible_output(env: Any) -> None:
    service, config, _db = env
    await service.create(
        preset="mock",
        provider_id="primary",
        options=script({"text": "partial answer", "error": {"code": "network_error", "after_output": True}}),
    )
    await service.create(preset="mock", provider_id="backup")
    await config.update({"llm.fallbackProvider": "backup"})
    rec = Recorder()
    with pytest.raises(ProviderError) as exc:
        await service.chat("primary", None, request(), emit=rec.emit, notify=rec.notify)
    assert exc.value.interrupted
    assert phase2_code(exc.value.error, interrupted=True)[0] == "PROVIDER_STREAM_INTERRUPTED"
    assert rec.notes == []
    assert rec.types[-2:] == ["error", "done"] and rec.types.count("done") == 1
    assert "".join(e.delta or "" for e in rec.events) == "partial answer"


async def test_cancel_ends_the_stream_with_user_aborted(env: Any) -> None:
    service, _config, _db = env
    await service.create(preset="mock", options=script({"text": "x" * 400, "chunk_chars": 1, "delay_ms": 5}))
    rec = Recorder()
    with anyio.move_on_after(0.1):
        await service.chat("mock", None, request(), emit=rec.emit)
    assert rec.types[-2:] == ["error", "done"]
    assert rec.events[-2].error is not None and rec.events[-2].error.code is MetonaErrorCode.USER_ABORTED
    assert 0 < rec.types.count("text_delta") < 400


async def test_timeout_ms_bounds_the_whole_call_not_each_attempt(env: Any) -> None:
    service, _config, _db = env
    slow_down = {"code": "rate_limited", "retryable": True, "retry_after_ms": 20_000, "times": 1}
    await service.create(preset="mock", options=script({"text": "ok", "error": slow_down}))
    req = request()
    req.constraints = MetonaConstraints(timeout_ms=300)
    rec = Recorder()
    with anyio.fail_after(5):  # without the bound: a 20 s wait for Retry-After, then "ok"
        with pytest.raises(ProviderError) as exc:
            await service.chat("mock", None, req, emit=rec.emit)
    assert exc.value.error.code is MetonaErrorCode.RATE_LIMITED
    assert exc.value.error.retry_after_ms == 20_000
    assert rec.types == ["error", "done"]


async def test_a_retry_within_the_timeout_still_happens(env: Any) -> None:
    service, _config, _db = env
    flaky = {"code": "network_error", "times": 1}
    await service.create(preset="mock", options=script({"text": "ok", "error": flaky}))
    req = request()
    req.constraints = MetonaConstraints(timeout_ms=60_000)
    assert (await service.chat("mock", None, req)).content == "ok"


async def test_cancel_while_failing_over_still_ends_the_stream(env: Any) -> None:
    service, config, _db = env
    await service.create(
        preset="mock", provider_id="primary", options=script({"text": "x", "error": {"code": "network_error"}})
    )
    await service.create(preset="mock", provider_id="backup")
    await config.update({"llm.fallbackProvider": "backup", "llm.maxRetries": 0})
    rec = Recorder()
    announced = anyio.Event()

    async def stuck_notify(method: str, params: Any) -> None:  # e.g. stdout full while announcing the switch
        announced.set()
        await anyio.sleep_forever()

    async def call() -> None:
        await service.chat("primary", None, request(), emit=rec.emit, notify=stuck_notify)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await announced.wait()
        tg.cancel_scope.cancel()
    assert rec.types == ["error", "done"]
    assert rec.events[0].error is not None and rec.events[0].error.code is MetonaErrorCode.USER_ABORTED


async def test_an_undecryptable_fallback_key_leaves_the_primary_error(env: Any) -> None:
    service, config, db = env
    await service.create(
        preset="mock", provider_id="primary", options=script({"text": "x", "error": {"code": "network_error"}})
    )
    await service.create(preset="mock", provider_id="backup")
    await config.update({"llm.fallbackProvider": "backup", "llm.maxRetries": 0})
    await config.set_secret("llm.fallbackApiKey", CANARY)
    # as if the master key had changed since: the stored ciphertext no longer decrypts
    await db.run(lambda conn: conn.execute("UPDATE secrets SET nonce = zeroblob(12) WHERE name LIKE 'config:%'"))
    rec = Recorder()
    with pytest.raises(ProviderError) as exc:
        await service.chat("primary", None, request(), emit=rec.emit, notify=rec.notify)
    assert exc.value.error.code is MetonaErrorCode.NETWORK_ERROR
    assert rec.types == ["error", "done"] and rec.notes == []


async def test_default_provider_and_missing_key(env: Any) -> None:
    service, config, _db = env
    with pytest.raises(BadRequestError) as exc:
        await service.default_provider()
    assert exc.value.code == "PROVIDER_NOT_CONFIGURED"
    await service.create(preset="openai", base_url="http://127.0.0.1:9/v1")  # no key
    assert await service.default_provider() == "openai"
    with pytest.raises(ProviderError) as failed:
        await service.chat(None, None, request())
    assert failed.value.error.code is MetonaErrorCode.AUTH_INVALID
    assert phase2_code(failed.value.error)[0] == "PROVIDER_AUTH_FAILED"
    await service.create(preset="mock")
    await config.update({"llm.defaultProvider": "mock"})
    assert (await service.chat(None, None, request("ping"))).content == "mock: ping"


async def test_config_validation(env: Any) -> None:
    _service, config, _db = env
    with pytest.raises(BadRequestError) as unknown:
        await config.update({"llm.nope": 1})
    assert unknown.value.code == "CONFIG_KEY_UNKNOWN"
    with pytest.raises(BadRequestError) as secret:
        await config.update({"llm.fallbackApiKey": CANARY})
    assert secret.value.code == "CONFIG_SECRET_WRITE_ONLY"
    with pytest.raises(BadRequestError):
        await config.update({"llm.maxRetries": 9})
    with pytest.raises(BadRequestError):
        await config.update({"llm.maxRetries": True})
    await config.set_secret("llm.fallbackApiKey", CANARY)
    values, secrets = await config.values()
    assert secrets == {"llm.fallbackApiKey": True}
    assert values["llm.maxRetries"] == 3
    assert CANARY not in repr(values)


async def test_update_checks_a_new_base_url_alone_too(env: Any) -> None:
    service, _config, _db = env
    await service.create(preset="openai", api_key=CANARY)
    with pytest.raises(BadRequestError) as exc:
        await service.update("openai", base_url="mock://nowhere")
    assert exc.value.code == "VALIDATION_ERROR"
    assert (await service.get("openai")).base_url == "https://api.openai.com/v1"


async def test_health_of_every_provider_survives_one_undecryptable_key(env: Any) -> None:
    service, _config, db = env
    await service.create(preset="mock", provider_id="good")
    await service.create(preset="mock", provider_id="broken", api_key=CANARY)
    await db.run(lambda conn: conn.execute("UPDATE secrets SET nonce = zeroblob(12) WHERE name LIKE 'provider:%'"))
    health = {h.provider_id: h for h in await service.health()}
    assert health["good"].healthy is True
    assert health["broken"].healthy is False
    assert health["broken"].error is not None and health["broken"].error.code == "SECRET_STORE_UNAVAILABLE"
    with pytest.raises(Exception) as one:
        await service.health("broken")
    assert getattr(one.value, "code", None) == "SECRET_STORE_UNAVAILABLE"


async def test_an_update_during_a_call_neither_leaks_nor_cuts_the_adapter_client(tmp_path: Path) -> None:
    import httpx

    calls: list[str] = []
    service: ProviderService

    async def handler(request: httpx.Request) -> httpx.Response:
        calls.append(str(request.url))
        if len(calls) == 1:
            # the user renames the provider while its first attempt is running, then the attempt fails (retryable)
            await service.update("openai", display_name="renamed")
            return httpx.Response(503, json={"error": {"message": "busy"}}, headers={"retry-after-ms": "0"})
        body = 'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'

        async def chunks() -> AsyncIterator[bytes]:
            yield body.encode()

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=chunks())

    db = await Database.open(tmp_path / "data")
    secrets = await SecretStore.open(db, tmp_path / "master.key")
    config = ConfigService(db, secrets)
    await config.migrate()
    service = ProviderService(db, secrets, config, transport=httpx.MockTransport(handler), retry_base_s=0.001)
    await service.migrate()
    try:
        await service.create(preset="openai", api_key=CANARY)
        old = await service.adapter("openai")
        clients: list[Any] = []
        make = old.client

        def spy() -> Any:
            client = make()
            if client not in clients:
                clients.append(client)
            return client

        old.client = spy  # type: ignore[method-assign]
        response = await service.chat("openai", None, request(), emit=Recorder().emit)
        assert response.content == "ok" and len(calls) == 2
        assert clients and all(c.is_closed for c in clients)  # the retired adapter closed what it opened
        assert old.client is spy and old._client is None
        assert await service.adapter("openai") is not old
    finally:
        await service.close()
        await db.close()


async def test_an_update_mid_stream_does_not_cut_the_answer(tmp_path: Path) -> None:
    """Over a real loopback socket: closing an httpx client closes its active connections too."""
    from anyio.abc import SocketAttribute, SocketStream

    renamed = anyio.Event()

    def sse_chunk(text: str) -> bytes:
        data = f'data: {{"choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}]}}\n\n'.encode()
        return b"%x\r\n%s\r\n" % (len(data), data)

    async def serve(stream: SocketStream) -> None:
        async with stream:
            await stream.receive(65536)
            await stream.send(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                + sse_chunk("first ")
            )
            await renamed.wait()
            end = b"data: [DONE]\n\n"
            await stream.send(sse_chunk("second") + b"%x\r\n%s\r\n0\r\n\r\n" % (len(end), end))

    db = await Database.open(tmp_path / "data")
    secrets = await SecretStore.open(db, tmp_path / "master.key")
    config = ConfigService(db, secrets)
    await config.migrate()
    service = ProviderService(db, secrets, config)
    await service.migrate()
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(SocketAttribute.local_port)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, serve)
            await service.create(preset="openai", base_url=f"http://127.0.0.1:{port}/v1", api_key=CANARY)
            rec = Recorder()

            async def emit(event: MetonaStreamEvent) -> None:
                await rec.emit(event)
                if event.delta == "first ":
                    await service.update("openai", display_name="renamed")
                    renamed.set()

            with anyio.fail_after(10):
                response = await service.chat("openai", None, request(), emit=emit)
            tg.cancel_scope.cancel()
        assert response.error is None and response.content == "first second"
        assert rec.types == ["text_delta", "text_delta", "done"]
    finally:
        await listener.aclose()
        await service.close()
        await db.close()


@pytest.mark.parametrize("content", [b"\xff\xfe not a key", b"", b"c2hvcnQ="])
def test_a_corrupt_key_file_is_a_typed_error(tmp_path: Path, content: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    from sidecar.storage.secrets import KEY_ENV, SecretKeyError, load_master_key

    monkeypatch.delenv(KEY_ENV, raising=False)
    key_file = tmp_path / "master.key"
    key_file.write_bytes(content)
    with pytest.raises(SecretKeyError) as exc:
        load_master_key(key_file)
    assert exc.value.code == "SECRET_STORE_UNAVAILABLE"


async def test_an_internal_failure_mid_stream_still_ends_the_stream(env: Any) -> None:
    service, _config, _db = env
    await service.create(preset="mock", options=script({"text": "abc", "chunk_chars": 1}))
    seen: list[str] = []

    async def emit(event: MetonaStreamEvent) -> None:
        seen.append(event.type.value)
        if event.type.value == "text_delta" and seen.count("text_delta") == 2:
            raise RuntimeError("a bug on our side")

    with pytest.raises(RuntimeError):
        await service.chat("mock", None, request(), emit=emit)
    assert seen == ["text_delta", "text_delta", "error", "done"]


async def test_health_checks_are_bounded(env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from sidecar.providers import service as service_module
    from sidecar.providers.mock import MockAdapter

    service, _config, _db = env
    await service.create(preset="mock", provider_id="slow")
    await service.create(preset="mock", provider_id="fast")

    async def hang(self: MockAdapter) -> list[Any]:
        if self.provider_id == "slow":
            await anyio.sleep(60)
        return []

    monkeypatch.setattr(MockAdapter, "list_models", hang)
    monkeypatch.setattr(service_module, "HEALTH_TIMEOUT_S", 0.2)
    with anyio.fail_after(5):
        health = await service.health()
    assert [h.provider_id for h in health] == ["slow", "fast"]
    assert health[0].healthy is False and health[0].error is not None
    assert health[0].error.code == "PROVIDER_TIMEOUT"
    assert health[1].healthy is True


async def test_extra_headers_are_secrets_too(env: Any, tmp_path: Path) -> None:
    service, _config, _db = env
    created = await service.create(
        preset="openai", provider_id="azure", options={"extra_headers": {"api-key": CANARY, "x-team": "blue"}}
    )
    assert created.options == {"extra_headers": {"api-key": "[hidden]", "x-team": "[hidden]"}}
    adapter = await service.adapter("azure")
    assert adapter.config.options["extra_headers"] == {"api-key": CANARY, "x-team": "blue"}
    # options round-tripped from get keep the hidden values; a new value replaces one
    options = dict((await service.get("azure")).options)
    options["extra_headers"] = {**options["extra_headers"], "x-team": "green"}
    await service.update("azure", options={**options, "think_tags": False})
    adapter = await service.adapter("azure")
    assert adapter.config.options["extra_headers"] == {"api-key": CANARY, "x-team": "green"}
    assert adapter.config.options["think_tags"] is False
    await service.update("azure", options={"extra_headers": {}})
    assert (await service.get("azure")).options == {}
    assert "extra_headers" not in (await service.adapter("azure")).config.options
    await service.update("azure", options={"extra_headers": {"api-key": CANARY}})
    await service.delete("azure")
    assert await service._secrets.names("provider:azure") == set()
    for path in (tmp_path / "data").rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path


async def test_a_provider_and_its_key_commit_together(env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    service, _config, _db = env
    secrets = service._secrets

    def broken(conn: sqlite3.Connection, name: str, value: str) -> None:
        raise OSError("disk went away mid-transaction")

    monkeypatch.setattr(secrets, "put_in", broken)
    with pytest.raises(OSError):
        await service.create(preset="openai", provider_id="half", api_key=CANARY)
    assert await service.list() == []  # no provider without the key it was created with
    monkeypatch.undo()
    await service.create(preset="openai", provider_id="whole", api_key=CANARY)
    monkeypatch.setattr(secrets, "put_in", broken)
    with pytest.raises(OSError):
        await service.update("whole", display_name="renamed", api_key="sk-new")
    assert (await service.get("whole")).display_name == "OpenAI"  # the update rolled back as a whole
    monkeypatch.undo()
    assert (await service.adapter("whole")).config.api_key == CANARY
