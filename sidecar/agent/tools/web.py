"""``http_get``: fetch one URL (http/https only), bounded in size, redirects and time.

No cookies and no credentials ever leave: a fresh client per call with a cookie jar that accepts nothing, and
``trust_env=False`` so neither ``.netrc`` auth nor proxy settings from the environment are picked up.
"""

from __future__ import annotations

from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field

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
        try:
            async with (
                httpx.AsyncClient(
                    follow_redirects=True,
                    max_redirects=MAX_REDIRECTS,
                    trust_env=False,
                    cookies=jar,
                    timeout=timeout,
                    headers={"user-agent": USER_AGENT, "accept": "*/*"},
                ) as client,
                client.stream("GET", args.url) as response,
            ):
                body, truncated = await _read_capped(response.aiter_bytes(), args.max_bytes)
                final_url = str(response.url)
                status = response.status_code
                content_type = response.headers.get("content-type", "")
                charset = response.charset_encoding
        except httpx.TooManyRedirects:
            raise ToolError(f"more than {MAX_REDIRECTS} redirects", "HTTP_ERROR") from None
        except httpx.UnsupportedProtocol:
            raise ToolError("a redirect led to a URL that is not http/https", "URL_SCHEME_NOT_ALLOWED") from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise ToolError(f"the request failed: {type(exc).__name__}: {str(exc)[:300]}", "HTTP_ERROR") from None
        text = _as_text(body, content_type, charset)
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


async def _read_capped(chunks: Any, limit: int) -> tuple[bytes, bool]:
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
