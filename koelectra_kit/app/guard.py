"""Only the analyst drives the app: one ASGI middleware in front of every route (the page, /static, the API).

The app reads and writes the analyst's files, and a browser will send requests to it from any page it shows. A
page on ``attacker.example`` can rebind its own name to 127.0.0.1 (DNS rebinding): the browser then treats the app
as that page's own origin and lets it upload files and read results. What tells such a request apart is its
``Host`` header, which still names ``attacker.example``. So, as Jupyter does:

1. **Host.** A request must name the app by the address it was bound to: 127.0.0.1, localhost or [::1] for a
   loopback bind; the ``--host`` given otherwise. The port is not compared: an SSH tunnel (``ssh -L 8000:...``)
   changes it, and a rebinding page cannot choose the name. A wildcard bind (0.0.0.0, ::) answers to any name,
   which is why it needs the token (3).
2. **Origin.** A POST, PUT, PATCH or DELETE whose ``Origin`` is another origin than the app's own is refused
   (the page's own requests carry the app's origin; tools such as curl send none, which is fine).
3. **Token**, when the app is served beyond this computer (``--host`` not a loopback address), or whenever one is
   set: a random per-run token, printed at start in the URL (``http://HOST:PORT/?token=...``). It is accepted as
   that query parameter, as an ``Authorization: token ...`` header, or as the cookie this middleware sets on the
   first answer to a request that carried it (HttpOnly, SameSite=Strict: the page's own requests send it, other
   sites' never do).

A refusal is ``403 {"error": "one line"}``.
"""
from __future__ import annotations

import ipaddress
import secrets
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
DEFAULT_PORTS = {"http": 80, "https": 443}


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` serves this computer only (127.0.0.0/8, ::1, localhost)."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_names(bind_host: str) -> frozenset | None:
    """The names a request's ``Host`` may carry for an app bound to ``bind_host``; None: any (a wildcard bind)."""
    if is_loopback(bind_host):  # and the address bound itself: 127.0.0.2 refused its own printed URL
        return LOOPBACK_NAMES | {bind_host.strip("[]").lower()}
    if bind_host in WILDCARDS:
        return None
    return frozenset({bind_host.strip("[]").lower()})


def new_token() -> str:
    return secrets.token_urlsafe(24)


def split_host(value: str) -> tuple[str | None, int | None]:
    """``Host`` header -> (name lower-cased, port or None); (None, None) when it is not a host[:port]."""
    try:
        parts = urlsplit("//" + value)
        return (parts.hostname or None), parts.port
    except ValueError:  # a port that is not a number, a bracket left open
        return None, None


class Guard:
    """The ASGI middleware: ``hosts`` from ``host_names``, ``token`` None for none required."""

    def __init__(self, app, hosts: frozenset | None, token: str | None):
        self.app, self.hosts, self.token = app, hosts, token

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):  # lifespan
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            else:
                await JSONResponse({"error": refusal}, status_code=403)(scope, receive, send)
            return
        if self.token is not None and self._query_token(scope) == self.token and \
                self._cookie_token(scope, headers) != self.token:
            send = self._setting_cookie(scope, send)  # the printed URL's first visit: the page's later requests
        await self.app(scope, receive, send)

    # -- the three rules
    def _refusal(self, scope, headers: Headers) -> str | None:
        raw = headers.get("host", "")
        name, _ = split_host(raw)
        if self.hosts is not None and name not in self.hosts:
            allowed = ", ".join(sorted(f"[{h}]" if ":" in h else h for h in self.hosts))
            return (f"refused: this app answers to {allowed} only, not to the host {raw[:80]!r} this request "
                    "named (a web page may have pointed its own name at this computer)")
        method = scope.get("method", "GET")
        origin = headers.get("origin")
        if method in STATE_CHANGING and origin is not None and not same_origin(origin, raw):
            return (f"refused: a {method} from the page at {origin[:80]!r}, another site than this app's; change "
                    "things from the app's own page")
        if self.token is not None and not any(secrets.compare_digest(t.encode(), self.token.encode()) for t in
                                              self._tokens(scope, headers)):
            return ("this app needs its token: open the address it printed when it started "
                    "(http://HOST:PORT/?token=...), or send the header 'Authorization: token ...'")
        return None

    def _tokens(self, scope, headers: Headers) -> list[str]:
        given = [self._query_token(scope), self._cookie_token(scope, headers)]
        kind, _, value = headers.get("authorization", "").partition(" ")
        if kind.lower() in ("token", "bearer"):
            given.append(value.strip())
        return [t for t in given if t]

    @staticmethod
    def _query_token(scope) -> str | None:
        values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
        return values[-1] if values else None

    @staticmethod
    def cookie_name(scope) -> str:
        # per port: cookies are shared across a host's ports, and two apps side by side must not overwrite each
        # other's token
        server = scope.get("server") or (None, "")
        return f"koelectra_kit_token_{server[1]}"

    def _cookie_token(self, scope, headers: Headers) -> str | None:
        jar = SimpleCookie()
        try:
            jar.load(headers.get("cookie", ""))
        except Exception:  # noqa: BLE001 - a malformed Cookie header is no token, not an error
            return None
        morsel = jar.get(self.cookie_name(scope))
        return morsel.value if morsel else None

    def _setting_cookie(self, scope, send):
        cookie = f"{self.cookie_name(scope)}={self.token}; Path=/; HttpOnly; SameSite=Strict"

        async def wrapped(message):
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).append("set-cookie", cookie)
            await send(message)
        return wrapped


def same_origin(origin: str, host_header: str) -> bool:
    """Whether an ``Origin`` (scheme://name[:port]) names the server the ``Host`` header names; "null" (a sandboxed
    frame, a file:// page) never does. The scheme is not compared: another site cannot serve from this name and
    port, and a TLS proxy in front of the app makes the page's own origin https."""
    try:
        o = urlsplit(origin)
        o_port = o.port or DEFAULT_PORTS.get(o.scheme)
    except ValueError:
        return False
    if o.scheme not in DEFAULT_PORTS or not o.hostname:
        return False
    name, port = split_host(host_header)
    return o.hostname == name and o_port == (port or DEFAULT_PORTS[o.scheme])
