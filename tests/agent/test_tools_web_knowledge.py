"""http_get against a loopback stub server; memory_search / knowledge_search over small fake services."""

from __future__ import annotations

import socket
import tracemalloc
import zlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from sidecar.agent.tools import ToolContext, ToolServices, default_registry, web
from sidecar.agent.tools.registry import ToolExecution
from sidecar.core.errors import ConflictError
from sidecar.ir import MetonaMemoryItem, MetonaToolCall
from sidecar.knowledge.models import Citation
from sidecar.retrieval.models import RankDetails, SearchHit, SearchResult
from tests.support.http_stub import Answer, StubServer, stub_server

REG = default_registry()


async def run(tool: str, args: dict[str, Any], services: Any = None) -> ToolExecution:
    ctx = ToolContext(run_id="r", session_id="ses_9", tool_call_id="c", services=services)
    return await REG.execute(MetonaToolCall(id="c", name=tool, args=args, iteration=1, timestamp=1), ctx)


@pytest.fixture(scope="module")
def server() -> Iterator[StubServer]:
    with stub_server() as s:  # one server for the module: its shutdown takes ~0.5 s
        yield s


@pytest.fixture
def stub(server: StubServer) -> StubServer:
    server.answers.clear()
    server.seen.clear()
    return server


# --- http_get ---------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_http_get_text(stub: StubServer) -> None:
    stub.answer(
        "/page", Answer(headers={"content-type": "text/plain; charset=utf-8"}, chunks=[b"hello ", "wörld".encode()])
    )
    result = await run("http_get", {"url": f"{stub.url}/page"})
    assert result.error_code is None
    assert result.result.result == {
        "url": f"{stub.url}/page",
        "final_url": f"{stub.url}/page",
        "status": 200,
        "content_type": "text/plain; charset=utf-8",
        "text": "hello wörld",
        "bytes": 12,
        "truncated": False,
    }
    assert (result.result.summary or "").endswith("\nhello wörld")
    assert "authorization" not in stub.seen[0].headers and "cookie" not in stub.seen[0].headers


@pytest.mark.anyio
async def test_http_get_size_cap(stub: StubServer) -> None:
    stub.answer("/big", Answer(headers={"content-type": "text/plain"}, chunks=[b"a" * 1000] * 10))
    result = await run("http_get", {"url": f"{stub.url}/big", "max_bytes": 2500})
    r = result.result.result
    assert result.error_code is None
    assert (r["bytes"], r["truncated"], r["text"]) == (2500, True, "a" * 2500)
    assert "cut off at max_bytes" in (result.result.summary or "")


@pytest.mark.anyio
async def test_http_get_binary_is_not_dumped(stub: StubServer) -> None:
    stub.answer("/img", Answer(headers={"content-type": "image/png"}, chunks=[b"\x89PNG\x00\x01\x02secretbytes"]))
    result = await run("http_get", {"url": f"{stub.url}/img"})
    assert result.result.result["text"] is None and result.result.result["bytes"] == 18
    assert "secretbytes" not in (result.result.summary or "")
    assert "Binary content" in (result.result.summary or "")


@pytest.mark.anyio
async def test_http_get_status_and_redirects_without_cookies(stub: StubServer) -> None:
    stub.answer("/r", Answer(status=302, headers={"location": "/gone", "set-cookie": "sid=abc; Path=/"}))
    stub.answer("/gone", Answer(status=404, headers={"content-type": "text/plain"}, chunks=[b"no such page"]))
    result = await run("http_get", {"url": f"{stub.url}/r"})
    assert result.error_code is None
    r = result.result.result
    assert (r["status"], r["final_url"], r["text"]) == (404, f"{stub.url}/gone", "no such page")
    assert [s.path for s in stub.seen] == ["/r", "/gone"]
    assert "cookie" not in stub.seen[1].headers


@pytest.mark.anyio
async def test_http_get_redirect_limits(stub: StubServer) -> None:
    stub.answer("/loop", Answer(status=302, headers={"location": "/loop"}))
    looped = await run("http_get", {"url": f"{stub.url}/loop"})
    assert looped.error_code == "HTTP_ERROR"
    assert len(stub.seen) == 6  # the first request and 5 redirects
    stub.answer("/ftp", Answer(status=302, headers={"location": "ftp://127.0.0.1/x"}))
    ftp = await run("http_get", {"url": f"{stub.url}/ftp"})
    assert ftp.error_code == "URL_SCHEME_NOT_ALLOWED"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("file:///etc/passwd", "URL_SCHEME_NOT_ALLOWED"),
        ("ftp://example.com/x", "URL_SCHEME_NOT_ALLOWED"),
        ("javascript:alert(1)", "URL_SCHEME_NOT_ALLOWED"),
        ("http:///nohost", "INVALID_URL"),
        ("http://xn--/", "INVALID_URL"),  # IDNA: an UnicodeError inside httpx
        ("http://xn--ls8h.la/", "INVALID_URL"),
    ],
)
async def test_http_get_refuses_bad_urls(url: str, code: str) -> None:
    result = await run("http_get", {"url": url})
    assert result.error_code == code


@pytest.mark.anyio
async def test_http_get_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = await run("http_get", {"url": f"http://127.0.0.1:{port}/x"})  # nothing listens there now
    assert result.error_code == "HTTP_ERROR"
    assert result.result.success is False


@pytest.mark.anyio
async def test_http_get_refuses_a_redirect_from_public_to_local(
    stub: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_addresses = web._host_addresses

    async def addresses(host: str) -> list[str]:  # pretend the approved 127.0.0.1 is a public server
        return ["93.184.216.34"] if host == "127.0.0.1" else await real_addresses(host)

    monkeypatch.setattr(web, "_host_addresses", addresses)
    port = stub.url.rsplit(":", 1)[1]
    stub.answer("/r", Answer(status=302, headers={"location": f"http://localhost:{port}/admin"}))
    stub.answer("/admin", Answer(headers={"content-type": "text/plain"}, chunks=[b"token=abc"]))
    refused = await run("http_get", {"url": f"{stub.url}/r"})
    assert refused.error_code == "REDIRECT_NOT_ALLOWED"
    assert [s.path for s in stub.seen] == ["/r"]
    stub.answer("/r2", Answer(status=302, headers={"location": f"{stub.url}/admin"}))  # public -> public
    allowed = await run("http_get", {"url": f"{stub.url}/r2"})
    assert allowed.error_code is None and allowed.result.result["text"] == "token=abc"


@pytest.mark.anyio
async def test_http_get_connects_to_the_address_it_checked(stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """DNS rebinding (issue 21): the check's answer is "public", the connection's own lookup would say loopback.
    The connection must go to the checked address (127.0.0.2, where nothing listens), never to the stub."""
    import anyio._core._sockets as anyio_sockets

    public = web._is_public_ip
    monkeypatch.setattr(web, "_is_public_ip", lambda ip: ip == "127.0.0.2" or public(ip))
    monkeypatch.setattr(web, "_host_addresses", _fake_lookup({"rebind.test": ["127.0.0.2"]}, web._host_addresses))
    real_getaddrinfo = anyio_sockets.getaddrinfo

    async def rebound(host: Any, *args: Any, **kwargs: Any) -> Any:  # the second answer: the local stub
        return await real_getaddrinfo("127.0.0.1" if host == "rebind.test" else host, *args, **kwargs)

    monkeypatch.setattr(anyio_sockets, "getaddrinfo", rebound)
    port = stub.url.rsplit(":", 1)[1]
    stub.answer("/admin", Answer(headers={"content-type": "text/plain"}, chunks=[b"token=abc"]))
    result = await run("http_get", {"url": f"http://rebind.test:{port}/admin"})
    assert result.error_code == "HTTP_ERROR", result
    assert stub.seen == []


def _fake_lookup(answers: dict[str, list[str]], real: Any) -> Any:
    async def lookup(host: str) -> list[str]:
        return answers[host] if host in answers else await real(host)

    return lookup


@pytest.mark.anyio
async def test_http_get_local_url_may_redirect_within_local_space(stub: StubServer) -> None:
    port = stub.url.rsplit(":", 1)[1]
    stub.answer("/r", Answer(status=302, headers={"location": f"http://localhost:{port}/admin"}))
    stub.answer("/admin", Answer(headers={"content-type": "text/plain"}, chunks=[b"ok"]))
    result = await run("http_get", {"url": f"{stub.url}/r"})
    assert result.error_code is None and result.result.result["text"] == "ok"


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("0.0.0.0", False),
        ("100.64.0.1", False),
        ("::1", False),
        ("::", False),
        ("fd00::1", False),
        ("fe80::1%eth0", False),
        ("::ffff:127.0.0.1", False),
        ("224.0.0.1", False),
        ("not an ip", False),
    ],
)
def test_public_addresses(address: str, public: bool) -> None:
    assert web._is_public_ip(address) is public


def _gzip(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    return packer.compress(data) + packer.flush()


@pytest.mark.anyio
async def test_http_get_decodes_gzip_and_deflate(stub: StubServer) -> None:
    text = "hello gzip " * 100
    raw_deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    bodies = {
        "gzip": _gzip(text.encode()),
        "deflate": zlib.compress(text.encode()),
        "Deflate": raw_deflate.compress(text.encode()) + raw_deflate.flush(),  # no zlib header
        "identity": text.encode(),
    }
    for encoding, body in bodies.items():
        headers = {"content-type": "text/plain", "content-encoding": encoding}
        stub.answer("/z", Answer(headers=headers, chunks=[body[:10], body[10:]]))
        result = await run("http_get", {"url": f"{stub.url}/z"})
        assert result.error_code is None, encoding
        assert (result.result.result["text"], result.result.result["truncated"]) == (text, False), encoding
    cut = await run("http_get", {"url": f"{stub.url}/z", "max_bytes": len(text)})
    assert cut.result.result["truncated"] is False
    stub.answer("/z", Answer(headers={"content-type": "text/plain", "content-encoding": "gzip"}, chunks=[b"junk"]))
    assert (await run("http_get", {"url": f"{stub.url}/z"})).error_code == "HTTP_ERROR"
    stub.answer("/br", Answer(headers={"content-type": "text/plain", "content-encoding": "br"}, chunks=[b"\x1b\x03"]))
    other = await run("http_get", {"url": f"{stub.url}/br"})
    assert other.error_code is None
    assert (other.result.result["text"], other.result.result["bytes"]) == (None, 2)  # undecoded: binary
    assert stub.seen[-1].headers["accept-encoding"] == "gzip, deflate"


@pytest.mark.anyio
async def test_http_get_gzip_bomb_is_not_inflated(stub: StubServer) -> None:
    bomb = _gzip(bytes(32 * 1024 * 1024))  # 32 MiB of zeros in ~32 KB
    stub.answer("/bomb", Answer(headers={"content-type": "text/plain", "content-encoding": "gzip"}, chunks=[bomb]))
    tracemalloc.start()
    try:
        result = await run("http_get", {"url": f"{stub.url}/bomb", "max_bytes": 1000})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.error_code is None
    assert (result.result.result["bytes"], result.result.result["truncated"]) == (1000, True)
    assert peak < 8 * 1024 * 1024


# --- memory_search ----------------------------------------------------------------------------------------------


class FakeMemory:
    def __init__(self, items: list[MetonaMemoryItem]) -> None:
        self.items = items
        self.calls: list[tuple[str, str | None, int]] = []

    async def relevant_memories(self, query: str, session_id: str | None, limit: int) -> list[MetonaMemoryItem]:
        self.calls.append((query, session_id, limit))
        return self.items[:limit]


def memory_item(i: int, content: str) -> MetonaMemoryItem:
    return MetonaMemoryItem(
        id=f"mem_{i}", type="semantic", content=content, source="user_input", importance=0.5,
        relevance_score=0.9 - i / 10, created_at=1_700_000_000_000,
    )  # fmt: skip


@pytest.mark.anyio
async def test_memory_search() -> None:
    memory = FakeMemory([memory_item(1, "User prefers tea."), memory_item(2, "User lives in Lyon.")])
    result = await run("memory_search", {"query": "drinks", "limit": 1}, SimpleNamespace(memory=memory))
    assert result.error_code is None
    assert memory.calls == [("drinks", "ses_9", 1)]
    assert result.result.result == [memory_item(1, "User prefers tea.").model_dump(mode="json")]
    assert result.result.result[0]["relevanceScore"] == 0.8
    assert "1. [semantic, relevance 0.80] User prefers tea." in (result.result.summary or "")
    empty = await run("memory_search", {"query": "x"}, SimpleNamespace(memory=FakeMemory([])))
    assert empty.result.result == [] and "No memories" in (empty.result.summary or "")


@pytest.mark.anyio
@pytest.mark.parametrize("services", [None, SimpleNamespace(), SimpleNamespace(memory=None)])
async def test_memory_search_unavailable(services: Any) -> None:
    result = await run("memory_search", {"query": "x"}, services)
    assert result.error_code == "TOOL_UNAVAILABLE"
    assert REG.unavailable(ToolContext("r", "s", "c", services=services))["memory_search"]


@pytest.mark.anyio
async def test_memory_search_bad_limit_is_invalid_arguments() -> None:
    result = await run("memory_search", {"query": "x", "limit": 50}, SimpleNamespace(memory=FakeMemory([])))
    assert result.error_code == "INVALID_ARGUMENTS" and result.invalid_arguments is True


# --- knowledge_search -------------------------------------------------------------------------------------------


def hit(i: int, text: str, citations: list[Citation] | None = None) -> SearchHit:
    return SearchHit(
        note_id=f"note_{i}", note_title=f"Note {i}", folder=None, block_id=f"blk_{i}", position=0, kind="paragraph",
        text=text, score=1 / i, ranks=RankDetails(fts_rank=i), citations=citations or [],
    )  # fmt: skip


class FakeRetrieval:
    def __init__(self, hits: list[SearchHit] | None = None, error: Exception | None = None) -> None:
        self.hits = hits or []
        self.error = error
        self.calls: list[tuple[str, str, int]] = []

    async def search(self, query: str, mode: str = "hybrid", top_k: int | None = None) -> SearchResult:
        self.calls.append((query, mode, top_k or 0))
        if self.error:
            raise self.error
        return SearchResult(query=query, mode=mode, profile_id="default", items=self.hits[:top_k], duration_ms=1.5)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_knowledge_search() -> None:
    cite = Citation(source_audio="att_1", start_time=1.0, end_time=2.5)
    retrieval = FakeRetrieval([hit(1, "Paris is the capital of France. " * 20), hit(2, "Lyon is big.", [cite])])
    result = await run(
        "knowledge_search", {"query": "capital", "mode": "fts", "top_k": 2}, SimpleNamespace(retrieval=retrieval)
    )
    assert result.error_code is None
    assert retrieval.calls == [("capital", "fts", 2)]
    assert [h["note_id"] for h in result.result.result["items"]] == ["note_1", "note_2"]
    assert result.citations[0] == {
        "note_id": "note_1",
        "note_title": "Note 1",
        "block_id": "blk_1",
        "score": 1.0,
        "text": ("Paris is the capital of France. " * 20)[:300],
    }
    assert result.citations[1]["citations"] == [{"source_audio": "att_1", "start_time": 1.0, "end_time": 2.5}]
    summary = result.result.summary or ""
    assert "[1] Note 1 (note note_1, block blk_1, score 1.000)" in summary
    assert "[2] Note 2" in summary and "Lyon is big." in summary


@pytest.mark.anyio
async def test_knowledge_search_errors_and_unavailable() -> None:
    mismatch = ConflictError("the index was built with another model", code="INDEX_MODEL_MISMATCH")
    failed = await run(
        "knowledge_search", {"query": "q", "mode": "vector"}, SimpleNamespace(retrieval=FakeRetrieval(error=mismatch))
    )
    assert failed.error_code == "INDEX_MODEL_MISMATCH"
    assert failed.result.error == "the index was built with another model"
    missing = await run("knowledge_search", {"query": "q"}, SimpleNamespace(memory=FakeMemory([])))
    assert missing.error_code == "TOOL_UNAVAILABLE"
    unset = await run("knowledge_search", {"query": "q"}, ToolServices(memory=None, retrieval=None))
    assert unset.error_code == "TOOL_UNAVAILABLE"
    empty = await run("knowledge_search", {"query": "q"}, SimpleNamespace(retrieval=FakeRetrieval([])))
    assert empty.error_code is None and empty.citations == [] and "No passages" in (empty.result.summary or "")
