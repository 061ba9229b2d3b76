"""``http_get``: fetch one URL (http/https only), bounded in size, redirects and time.

No cookies and no credentials ever leave: a fresh client per call with a cookie jar that accepts nothing, and
``trust_env=False`` so neither ``.netrc`` auth nor proxy settings from the environment are picked up.

Redirects are followed by hand (at most :data:`MAX_REDIRECTS`), each hop's scheme checked again. When the URL the
user approved names a public host, no hop may lead to a loopback, private, link-local, unique-local or
unspecified address (``REDIRECT_NOT_ALLOWED``): an approved public URL must not become a way into the local
network. Each hop's host is resolved once, checked, and the connection goes to the checked address (a network
backend that connects to the pinned address, TLS still verified for the name): a DNS answer that changes between
the check and the connection (DNS rebinding) is never used. A URL that is itself local stays allowed, redirects
within local space included.

The body is read raw and decompressed here (gzip, deflate, identity), never beyond ``max_bytes`` of output, so a
compression bomb costs no memory; a body in another content-encoding is returned undecoded, as binary.
"""

from __future__ import annotations

import ipaddress
import socket
import zlib
from collections.abc import AsyncIterator
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any
from urllib.parse import urlsplit

import anyio
from pydantic import Field

from sidecar.core.redact import redact_head
from sidecar.ir import MetonaRiskLevel, MetonaToolCategory

from .base import Tool, ToolContext, ToolError, ToolOutput, ToolParams

DEFAULT_MAX_BYTES = 1_048_576
MAX_BYTES = 5 * 1_048_576
MAX_REDIRECTS = 5
USER_AGENT = "Metona/0.1 (http_get tool)"
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript", "application/x-yaml")
_TEXT_SUFFIXES = ("+json", "+xml")


class HttpGetParams(ToolParams):
    url: str = Field(min_length=1, max_length=4000, description="http:// or https:// URL.")
    max_bytes: int = Field(DEFAULT_MAX_BYTES, ge=1, le=MAX_BYTES, description="Most body bytes to read.")


class HttpGet(Tool):
    name = "http_get"
    description = (
        "HTTP GET an http(s) URL (up to 5 redirects, no cookies or credentials): status, content type and body "
        "text, cut at max_bytes; binary bodies are not shown. Needs the user's permission."
    )
    Params = HttpGetParams
    category = MetonaToolCategory.NETWORK
    risk_level = MetonaRiskLevel.MEDIUM
    requires_permission = True
    permission = "network.http"
    timeout_ms = 20_000

    async def run(self, args: HttpGetParams, ctx: ToolContext) -> ToolOutput:
        import httpx  # not needed at start-up

        _check_url(args.url)
        jar = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
        timeout = httpx.Timeout(15.0, connect=10.0)
        pins = _PinnedBackend()
        try:
            async with httpx.AsyncClient(
                follow_redirects=False,
                trust_env=False,
                cookies=jar,
                timeout=timeout,
                headers={"user-agent": USER_AGENT, "accept": "*/*", "accept-encoding": "gzip, deflate"},
                transport=pins.transport(),
            ) as client:
                request = client.build_request("GET", args.url)
                origin_public = await pins.resolve(request.url.host)
                for hop in range(MAX_REDIRECTS + 1):
                    response = await client.send(request, stream=True)
                    try:
                        if response.next_request is None:
                            encoding = response.headers.get("content-encoding", "")
                            body, truncated, decoded = await _read_body(response.aiter_raw(), encoding, args.max_bytes)
                            final_url = str(response.url)
                            status = response.status_code
                            content_type = response.headers.get("content-type", "")
                            charset = response.charset_encoding
                            break
                    finally:
                        await response.aclose()
                    if hop == MAX_REDIRECTS:
                        raise ToolError(f"more than {MAX_REDIRECTS} redirects", "HTTP_ERROR")
                    request = response.next_request
                    target = str(request.url)
                    if request.url.scheme not in ("http", "https"):
                        raise ToolError("a redirect led to a URL that is not http/https", "URL_SCHEME_NOT_ALLOWED")
                    if not await pins.resolve(request.url.host) and origin_public:
                        shown = redact_head(target, 300)
                        raise ToolError(
                            f"a redirect from a public address to a local/private one was refused: {shown}",
                            "REDIRECT_NOT_ALLOWED",
                        )
        except httpx.UnsupportedProtocol:
            raise ToolError("a redirect led to a URL that is not http/https", "URL_SCHEME_NOT_ALLOWED") from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            reason = redact_head(str(exc), 300)
            raise ToolError(f"the request failed: {type(exc).__name__}: {reason}", "HTTP_ERROR") from None
        except UnicodeError:  # an IDNA host name that cannot be encoded or decoded
            raise ToolError("the URL has an invalid host name", "INVALID_URL") from None
        text = _as_text(body, content_type, charset) if decoded else None
        result = {
            "url": args.url,
            "final_url": final_url,
            "status": status,
            "content_type": content_type,
            "text": text,
            "bytes": len(body),
            "truncated": truncated,
        }
        return ToolOutput(result=result, summary=_summary(result))


def _check_url(url: str) -> None:
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        raise ToolError("the URL cannot be parsed", "INVALID_URL") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ToolError(
            f"only http and https URLs are allowed, not {parts.scheme or 'none'!r}", "URL_SCHEME_NOT_ALLOWED"
        )
    if not parts.hostname:
        raise ToolError("the URL has no host", "INVALID_URL")


# --- where a redirect may go -------------------------------------------------------------------------------------


def _is_public_ip(text: str) -> bool:
    """False for loopback, private (RFC 1918, unique-local ``fc00::/7``), link-local, unspecified, multicast,
    reserved and shared (CGNAT) addresses; IPv4-mapped IPv6 is judged as the IPv4 address."""
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])  # drop an IPv6 zone (fe80::1%eth0)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def _host_addresses(host: str) -> list[str]:
    """The addresses ``host`` stands for: itself when it is an IP literal, else what the resolver answers."""
    bare = host.strip("[]")
    try:
        ipaddress.ip_address(bare.split("%", 1)[0])
        return [bare]
    except ValueError:
        pass
    try:
        infos = await anyio.getaddrinfo(bare, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [str(info[4][0]) for info in infos]


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


class _PinnedBackend:
    """httpcore's network backend, except that a host name connects to the address :meth:`resolve` checked for
    it (pinned) instead of being resolved again; an IP literal connects as it is."""

    def __init__(self) -> None:
        import httpcore

        self._delegate = httpcore.AnyIOBackend()
        self._pins: dict[str, str] = {}

    async def resolve(self, host: str) -> bool:
        """Resolve ``host`` once and pin its first address; whether every address is public."""
        addresses = await _host_addresses(host)
        if not addresses:
            raise ToolError(f"the host {host[:200]!r} could not be resolved", "HTTP_ERROR")
        if not _is_ip_literal(host):
            self._pins[host.lower()] = addresses[0]
        return all(_is_public_ip(a) for a in addresses)

    def transport(self) -> Any:
        import httpx

        transport = httpx.AsyncHTTPTransport(trust_env=False)
        pool = transport._pool
        if not hasattr(pool, "_network_backend"):  # httpcore changed: fail loudly rather than connect unpinned
            raise ToolError("the HTTP client cannot pin addresses", "HTTP_ERROR")
        pool._network_backend = self  # type: ignore[assignment]  # duck-typed: httpcore's backend methods
        return transport

    async def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        import httpcore

        if not _is_ip_literal(host):
            pinned = self._pins.get(host.lower())
            if pinned is None:
                raise httpcore.ConnectError(f"{host} was not checked before the connection")
            host = pinned
        return await self._delegate.connect_tcp(host, port, *args, **kwargs)

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
        import httpcore

        raise httpcore.ConnectError("unix sockets are not used by http_get")

    async def sleep(self, seconds: float) -> None:
        await self._delegate.sleep(seconds)


# --- the body ----------------------------------------------------------------------------------------------------


class _Inflater:
    """Incremental gzip/deflate decoding; a ``deflate`` body without the zlib header is accepted too."""

    def __init__(self, encoding: str) -> None:
        self._raw_fallback = encoding == "deflate"
        self._obj = zlib.decompressobj(zlib.MAX_WBITS | 16 if encoding != "deflate" else zlib.MAX_WBITS)
        self._started = False

    def decompress(self, data: bytes, max_length: int) -> bytes:
        try:
            out = self._obj.decompress(data, max_length)
        except zlib.error:
            if not (self._raw_fallback and not self._started):
                raise
            self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._obj.decompress(data, max_length)
        self._started = True
        return out

    @property
    def tail(self) -> bytes:
        return self._obj.unconsumed_tail

    @property
    def eof(self) -> bool:
        return self._obj.eof


async def _read_body(chunks: AsyncIterator[bytes], content_encoding: str, limit: int) -> tuple[bytes, bool, bool]:
    """(body, truncated, decoded): at most ``limit`` bytes of the decoded body. ``decoded`` is False when the
    content-encoding is not one handled here: the raw bytes are returned then."""
    encoding = content_encoding.strip().lower()
    if encoding in ("", "identity"):
        body, truncated = await _read_capped(chunks, limit)
        return body, truncated, True
    if encoding not in ("gzip", "x-gzip", "deflate"):
        body, truncated = await _read_capped(chunks, limit)
        return body, truncated, False
    inflater = _Inflater("deflate" if encoding == "deflate" else "gzip")
    buf = bytearray()
    try:
        async for chunk in chunks:
            pending = chunk
            while pending and not inflater.eof:
                buf += inflater.decompress(pending, limit - len(buf) + 1)  # one byte more shows there is more
                if len(buf) > limit:
                    return bytes(buf[:limit]), True, True
                pending = inflater.tail
            if inflater.eof:
                break
        while not inflater.eof:  # output zlib still holds back
            more = inflater.decompress(b"", limit - len(buf) + 1)
            if not more:
                break
            buf += more
            if len(buf) > limit:
                return bytes(buf[:limit]), True, True
    except zlib.error:
        raise ToolError(f"the {encoding} response body could not be decompressed", "HTTP_ERROR") from None
    return bytes(buf), False, True


async def _read_capped(chunks: AsyncIterator[bytes], limit: int) -> tuple[bytes, bool]:
    buf = bytearray()
    async for chunk in chunks:
        room = limit - len(buf)
        if len(chunk) > room:
            buf.extend(chunk[:room])
            return bytes(buf), True
        buf.extend(chunk)
    return bytes(buf), False


def _is_text_type(content_type: str) -> bool | None:
    """True/False from the media type; None when there is none."""
    media = content_type.split(";", 1)[0].strip().lower()
    if not media:
        return None
    return media.startswith(_TEXT_TYPES) or media.endswith(_TEXT_SUFFIXES)


def _as_text(body: bytes, content_type: str, charset: str | None) -> str | None:
    textual = _is_text_type(content_type)
    if textual is False:
        return None
    if textual is None and b"\x00" in body[:4096]:
        return None
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:  # an unknown charset name
        return body.decode("utf-8", errors="replace")


def _summary(r: dict[str, Any]) -> str:
    kind = r["content_type"] or "no content type"
    head = f"HTTP {r['status']} from {r['final_url']} ({kind}, {r['bytes']} bytes"
    head += ", cut off at max_bytes)" if r["truncated"] else ")"
    if r["text"] is None:
        return f"{head}\nBinary content: not shown."
    return f"{head}\n{r['text']}"
