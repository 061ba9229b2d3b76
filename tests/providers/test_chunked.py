"""The coalescing chunked reader (issue 22): every whole HTTP chunk at hand in one ``Data``, the same bytes, the same
errors and the same connection state as h11's own reader."""

from __future__ import annotations

import random

import anyio
import h11
import httpx
import pytest

from sidecar.providers._chunked import CoalescingChunkedReader, coalesce_chunks
from tests.conformance.loopback import LoopbackServer, Recording

HEAD = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-type: text/event-stream\r\n\r\n"


def _chunked(payloads: list[bytes], trailer: bytes = b"0\r\n\r\n") -> bytes:
    return b"".join(b"%x\r\n%b\r\n" % (len(p), p) for p in payloads) + trailer


def _read(body: bytes, pieces: list[int], *, coalesce: bool, eof: bool = False) -> tuple[list[object], object]:
    """Feed ``HEAD + body`` to a client h11 connection in pieces of the given sizes; (events, error or state)."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="POST", target="/", headers=[("host", "x"), ("content-length", "0")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(HEAD)
    assert isinstance(conn.next_event(), h11.Response)
    if coalesce:
        conn._reader = CoalescingChunkedReader()
    events: list[object] = []
    data, at = body, 0
    try:
        for size in [*pieces, len(data)]:
            conn.receive_data(data[at : at + size])
            at += size
            while (event := conn.next_event()) not in (h11.NEED_DATA, h11.PAUSED):
                events.append(event)
            if at >= len(data):
                break
        if eof:
            conn.receive_data(b"")
            events.append(conn.next_event())
    except h11.RemoteProtocolError as exc:
        return events, f"{type(exc).__name__}: {exc}"
    return events, conn.their_state


def _body(events: list[object]) -> bytes:
    return b"".join(bytes(e.data) for e in events if isinstance(e, h11.Data))


def test_whole_chunks_at_hand_come_as_one_event_with_the_same_bytes() -> None:
    rng = random.Random(22)
    payloads = [b"data: %d %s\n\n" % (i, b"x" * rng.randrange(0, 300)) for i in range(500)]
    body = _chunked(payloads, b"0\r\nx-trailer: 1\r\n\r\n")
    pieces = [rng.randrange(1, 4000) for _ in range(200)]
    stock, stock_state = _read(body, pieces, coalesce=False)
    fast, fast_state = _read(body, pieces, coalesce=True)
    assert _body(fast) == _body(stock) == b"".join(payloads)
    assert fast_state == stock_state == h11.DONE
    assert fast[-1] == stock[-1] == h11.EndOfMessage(headers=[("x-trailer", "1")])
    # h11 gives one event per chunk (or piece of one); coalesced, at most one per read, plus the pieces it splits
    assert len([e for e in stock if isinstance(e, h11.Data)]) >= 500
    assert len([e for e in fast if isinstance(e, h11.Data)]) <= 2 * len(pieces)


@pytest.mark.parametrize(
    "body",
    [
        _chunked([b"ok"]).replace(b"0\r\n\r\n", b"zz\r\n"),  # an illegal chunk header after a good chunk
        b"2\r\nokXX3\r\nabc\r\n0\r\n\r\n",  # a chunk not followed by CRLF
        b"2\r\nok\r\n-1\r\nx\r\n",
        b"2;ext=1\r\nok\r\n1 \r\n!\r\n0\r\n\r\n",  # extensions and trailing blanks: h11 accepts both
    ],
)
@pytest.mark.parametrize("split", [[10**6], [1] * 40, [3, 5, 7, 11]])
def test_malformed_or_unusual_chunks_read_as_h11_reads_them(body: bytes, split: list[int]) -> None:
    stock, stock_end = _read(body, split, coalesce=False)
    fast, fast_end = _read(body, split, coalesce=True)
    assert fast_end == stock_end
    assert _body(fast) == _body(stock)


def test_a_body_cut_mid_chunk_fails_as_h11_fails_it() -> None:
    body = _chunked([b"first", b"second"], b"")[:-4]
    stock, stock_end = _read(body, [7], coalesce=False, eof=True)
    fast, fast_end = _read(body, [7], coalesce=True, eof=True)
    assert "incomplete chunked read" in str(stock_end)
    assert fast_end == stock_end
    assert _body(fast) == _body(stock) == b"firstseco"


def test_installed_on_a_real_http11_response_and_the_connection_is_reused() -> None:
    chunks = tuple(b"data: %d\n\n" % i for i in range(50))
    rec = Recording(status=200, headers={"content-type": "text/event-stream"}, chunks=chunks)

    async def main() -> tuple[list[bool], list[bytes], int]:
        installed, bodies = [], []
        async with httpx.AsyncClient() as client:
            for _ in range(2):
                async with client.stream("POST", server.url + "/v1/x", json={}) as response:
                    installed.append(coalesce_chunks(response))
                    bodies.append(b"".join([c async for c in response.aiter_raw()]))
            return installed, bodies, len(client._transport._pool.connections)

    with LoopbackServer() as server:
        server.answer("/v1/x", rec)
        server.answer("/v1/x", rec)
        installed, bodies, connections = anyio.run(main)
    assert installed == [True, True]
    assert bodies == [b"".join(chunks)] * 2
    assert connections == 1  # the first answer ended cleanly: its connection served the second


def test_left_alone_on_anything_else() -> None:
    async def main() -> bool:
        transport = httpx.MockTransport(lambda request: httpx.Response(200, content=b"data: 1\n\n"))
        async with httpx.AsyncClient(transport=transport) as client:
            async with client.stream("GET", "http://x/") as response:
                return coalesce_chunks(response)

    assert anyio.run(main) is False
