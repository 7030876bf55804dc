"""The service's token: where it is kept, and the middleware that asks every request for it.

A request carries the token as ``Authorization: Bearer T``, as the cookie that ``?token=T`` sets
(HttpOnly, SameSite=Strict; the page is then sent to its own address without the token), and a
write (``POST``) by cookie only from a page of this origin (``Origin`` header). Tokens are
compared in constant time."""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

COOKIE = "curator_token"
#: Requests that change something: they need the header, or the cookie from this origin.
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def token_file() -> Path:
    """``$XDG_CONFIG_HOME/curator/serve-token`` (``~/.config`` by default)."""
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "curator" / "serve-token"


def stored_token(path: Path | None = None) -> str:
    """The token kept in ``path`` (``token_file()``); made on first use, readable by its owner
    alone (mode 0600, its folder 0700)."""
    path = path or token_file()
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = ""
    if token:
        return token
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)  # a file there before, with a wider mode
        f.write(token + "\n")
    return token


def _same(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def _bearer(request: web.Request) -> str | None:
    kind, _, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip() if kind.lower() == "bearer" else None


def _same_origin(request: web.Request) -> bool:
    return request.headers.get("Origin") == f"{request.scheme}://{request.host}"


def _refused(request: web.Request, status: int, message: str) -> web.Response:
    if request.path.startswith("/api/"):
        return web.json_response({"error": message}, status=status)
    return web.Response(status=status, text=f"{message}\n")


def token_middleware(token: str) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """Refuse (401/403) a request without the token; turn ``?token=`` into the cookie."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if "token" in request.query:
            if request.method != "GET" or not _same(request.query["token"], token):
                return _refused(request, 401, "wrong token")
            query = request.rel_url.query.copy()
            del query["token"]
            raise _redirect(request.rel_url.with_query(query).raw_path_qs
                            if query else request.rel_url.raw_path, token)
        if _same(_bearer(request), token):
            return await handler(request)
        if not _same(request.cookies.get(COOKIE), token):
            return _refused(request, 401, "token required: open the address `curate serve` "
                            "printed, or send Authorization: Bearer TOKEN")
        if request.method in WRITES and not _same_origin(request):
            return _refused(request, 403, "a write by cookie must come from this origin")
        return await handler(request)

    return middleware


def _redirect(location: str, token: str) -> web.HTTPSeeOther:
    """To ``location`` on this server (``//host/...`` would leave it), with the cookie set."""
    response = web.HTTPSeeOther("/" + location.lstrip("/\\"))
    response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/")
    return response
