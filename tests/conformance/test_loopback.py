"""The loopback server itself: split points reach the client, a cut drops the connection mid-body, requests are
recorded, an unrouted path answers 404, answers are served in order per path."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from .loopback import LoopbackServer, Recording

pytestmark = pytest.mark.anyio

CHUNKS = (b'data: {"a": 1}\n\n', b'data: {"b"', b": 2}\n\n", b"data: [DONE]\n\n")


def recording(*, cut: bool = False, status: int = 200, chunks: tuple[bytes, ...] = CHUNKS) -> Recording:
    return Recording(
        status=status, headers={"content-type": "text/event-stream", "x-test": "yes"}, chunks=chunks, cut=cut
    )


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as s:
        yield s


async def test_chunks_arrive_with_their_split_points(server: LoopbackServer) -> None:
    server.answer("/v1/chat", recording())
    async with httpx.AsyncClient() as client:
        async with client.stream("POST", server.url + "/v1/chat", json={"model": "m"}) as response:
            got = [chunk async for chunk in response.aiter_raw()]
            assert response.status_code == 200
            assert response.headers["x-test"] == "yes"
            assert response.headers["transfer-encoding"] == "chunked"
    assert tuple(got) == CHUNKS


async def test_cut_drops_the_connection_mid_body(server: LoopbackServer) -> None:
    server.answer("/p", recording(cut=True))
    got: list[bytes] = []
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.RemoteProtocolError):
            async with client.stream("POST", server.url + "/p", json={}) as response:
                async for chunk in response.aiter_raw():
                    got.append(chunk)
    assert tuple(got) == CHUNKS


async def test_requests_are_recorded_and_answers_served_in_order(server: LoopbackServer) -> None:
    server.answer("/p", recording(status=429, chunks=(b'{"error": 1}',)))
    server.answer("/p", recording(chunks=(b"second",)))
    async with httpx.AsyncClient() as client:
        first = await client.post(server.url + "/p?x=1", json={"n": 1}, headers={"Authorization": "Bearer k"})
        second = await client.post(server.url + "/p", json={"n": 2})
        third = await client.post(server.url + "/other", content=b"not json")
    assert (first.status_code, first.content) == (429, b'{"error": 1}')
    assert (second.status_code, second.content) == (200, b"second")
    assert third.status_code == 404 and "/other" in third.json()["error"]["message"]
    assert [(r.method, r.path, r.json) for r in server.requests] == [
        ("POST", "/p?x=1", {"n": 1}),
        ("POST", "/p", {"n": 2}),
        ("POST", "/other", None),
    ]
    assert server.requests[0].headers["authorization"] == "Bearer k"
    assert server.requests[2].body == b"not json"
    assert server.pending() == {}
