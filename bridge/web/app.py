"""The UI's WSGI application: routes, the token login, and each page drawn as HTML (Jinja2, every
value escaped) or as its JSON twin (``?format=json``).

Read-only: every route answers GET (and HEAD); the one POST is the login form, which sets a cookie
and writes nothing. With tokens, a request carries one in the ``olbridge_ui`` cookie (HttpOnly,
SameSite=Strict) or, for scripts, in ``Authorization: Bearer``; it sees the namespaces its token
may write, and Global assets.
"""

from __future__ import annotations

import contextlib
import hmac
import importlib.resources
import json
import queue
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode

import attrs
import jinja2
import markupsafe
import orjson

from bridge.catalog import Catalog
from bridge.catalog.browse import Scope
from bridge.catalog.runs import Runs
from bridge.config import NamedToken, bearer
from bridge.errors import BridgeError, NotFoundError, ValidationError
from bridge.model.health import Selector
from bridge.openlineage.convert import Converter
from bridge.web import pages

COOKIE = "olbridge_ui"
MAX_FORM = 4096
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}
# nothing but this server: no script, style, font or image from elsewhere, no frames
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
Environ = dict[str, Any]


@attrs.frozen
class Response:
    status: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "text/html; charset=utf-8"


def link(path: str, params: dict[str, Any] | None = None, **changes: Any) -> str:
    """``path`` with the query ``params`` updated by ``changes`` (empty values left out; a list
    value repeats its key)."""
    merged = {**(params or {}), **changes}
    pairs: list[tuple[str, str]] = []
    for key, value in merged.items():
        for v in value if isinstance(value, list | tuple) else [value]:
            if v is not None and v is not False and v != "":  # a 0 stays (0 == False)
                pairs.append((key, str(v)))
    return path + ("?" + urlencode(pairs) if pairs else "")


def asset_url(asset_id: str, **params: Any) -> str:
    return link("/assets/" + quote(asset_id, safe=""), params)


def run_url(run_id: str) -> str:
    return "/runs/" + quote(run_id, safe="")


# the embeddings, overrides and isolates of bidirectional text: one in a name would turn the rest
# of the line around it (an ``exe.txt`` reading ``txt.exe``)
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")


class _FieldValue(str):
    """A form field's value (``|field``): given back as it was typed, whatever it holds, so that
    the form sends it again as it is (its bidirectional overrides too)."""


def _without_bidi(value: Any) -> Any:
    """What a page shows, each bidirectional override written as its escape (``\\u202e``), as
    the command line shows it; markup stays markup (the escapes are plain text); a form field's
    value (:class:`_FieldValue`) as it is, which the browser shows in its field and sends back."""
    if isinstance(value, _FieldValue):
        return str(value)
    if not isinstance(value, str) or not _BIDI.search(value):
        return value
    shown = _BIDI.sub(lambda found: f"\\u{ord(found.group()):04x}", value)
    return markupsafe.Markup(shown) if isinstance(value, markupsafe.Markup) else shown


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("bridge.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_without_bidi,
    )
    env.globals.update(link=link, asset_url=asset_url, run_url=run_url, max_depth=pages.MAX_DEPTH)
    env.filters["json"] = lambda value: json_bytes(value, indent=True).decode()
    env.filters["field"] = lambda value: _FieldValue("" if value is None else value)
    return env


def json_bytes(value: Any, *, indent: bool = False) -> bytes:
    """A page's values as JSON: by orjson, else (an integer past 64 bits, which the receiver keeps
    exact in facets and metadata) by the standard library, the same text but for spacing."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else None)
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False, indent=2 if indent else None).encode()


def json_twin(data: Any) -> Any:
    """The page's data as JSON: its drawing objects (``layout``) left out: their figures are there."""
    if isinstance(data, dict):
        return {k: json_twin(v) for k, v in data.items() if k != "layout"}
    if isinstance(data, list):
        return [json_twin(v) for v in data]
    return data


VALUE_AT_MOST = 4096  # characters of a query parameter's value (an id is at most 512; a namespace/name 2,048)
# the pages whose filters a bad value comes from: a 400 links to the page without them
FILTERED_PAGES = frozenset(("/assets", "/runs", "/health", "/lineage", "/neighbours"))


class UiApp:
    """The WSGI callable. ``open_catalog`` opens a catalog; each server thread opens its own once."""

    def __init__(
        self,
        open_catalog: Callable[[], Catalog],
        converter: Converter,
        tokens: Sequence[NamedToken] = (),
        selectors: Sequence[Selector] = (),
    ) -> None:
        self.open_catalog = open_catalog
        self.converter = converter
        self.tokens = tuple(tokens)
        self.selectors = tuple(selectors)  # the config's [[freshness]] tables, for the assets' health
        self.templates = _environment()
        # open catalogs, each lent to one request at a time (the server runs a thread a request):
        # as many are kept as requests ever ran at once
        self._idle: queue.LifoQueue[Catalog] = queue.LifoQueue()

    @contextlib.contextmanager
    def catalog(self) -> Iterator[Catalog]:
        try:
            found = self._idle.get_nowait()
        except queue.Empty:
            found = self.open_catalog()
        try:
            yield found
        except (NotFoundError, ValidationError):  # a page that is not there, a bad value: the catalog is fine
            self._idle.put(found)
            raise
        except BaseException:
            found.close()  # a connection another error went through is not lent again
            raise
        self._idle.put(found)

    def close(self) -> None:
        while not self._idle.empty():
            self._idle.get_nowait().close()

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        response = self.respond(environ)
        headers = [
            ("Content-Type", response.content_type),
            ("Content-Length", str(len(response.body))),
            ("Content-Security-Policy", POLICY),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
            ("Cache-Control", "no-store"),
            *response.headers,
        ]
        start_response(response.status, headers)
        return [b"" if environ.get("REQUEST_METHOD") == "HEAD" else response.body]

    # --- requests ---------------------------------------------------------------------------

    def respond(self, environ: Environ) -> Response:
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "/").encode("latin-1").decode("utf-8", "replace")
        raw = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        joined = {"expand": "\n", "meta": pages.REPEATED}  # the parameters given again and again
        query = {k: joined[k].join(v) if k in joined else v[0] for k, v in raw.items()}
        as_json = query.pop("format", "") == "json"
        if path.startswith("/static/"):
            return self.static(path[len("/static/") :])
        if path == "/login":
            return self.login(environ, method, query)
        if method not in ("GET", "HEAD"):
            return self.error(as_json, "405 Method Not Allowed", "this view is read-only: GET only")
        if path == "/logout":
            return redirect("/login", (("Set-Cookie", f"{COOKIE}=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict"),))
        scope: Scope | None = None
        if self.tokens:
            token = self.token_of(environ)
            if token is None:
                if as_json:
                    sent = bearer(environ.get("HTTP_AUTHORIZATION", "")) is not None
                    why = "the token sent is not one of this view's" if sent else "a token is needed"
                    return self.error(True, "401 Unauthorized", f"{why}: log in, or send Authorization: Bearer TOKEN")
                return redirect(link("/login", next=_sent(environ, path)))
            scope = Scope(token.namespaces)
        if "\x00" in path or any("\x00" in key or any("\x00" in v for v in values) for key, values in raw.items()):
            # no id, name or filter of the catalog holds one (PostgreSQL's text cannot)
            return self.error(as_json, "400 Bad Request", "the address holds a NUL character (%00)")
        long = sorted(key for key, values in raw.items() if any(len(v) > VALUE_AT_MOST for v in values))
        if long:  # no id, name or filter is so long (a search's pattern past SQLite's LIKE limit failed)
            again = path if path in FILTERED_PAGES else None
            message = f"{long[0]}: at most {VALUE_AT_MOST:,} characters"
            return self.error(as_json, "400 Bad Request", message, again=again)
        try:
            return self.page(path, query, scope, as_json)
        except NotFoundError as exc:
            return self.error(as_json, "404 Not Found", str(exc))
        except ValidationError as exc:  # a bad filter: the page offers itself again without them
            again = path if path in FILTERED_PAGES else None
            return self.error(as_json, "400 Bad Request", str(exc), again=again)
        except BridgeError as exc:
            return self.error(as_json, "500 Internal Server Error", str(exc))
        except Exception:
            traceback.print_exc(file=sys.stderr)
            return self.error(as_json, "500 Internal Server Error", "internal error (see the server's log)")

    def page(self, path: str, query: dict[str, str], scope: Scope | None, as_json: bool) -> Response:
        if path in ("/", ""):
            return redirect("/assets")
        with self.catalog() as catalog:
            return self.page_of(catalog, path, query, scope, as_json)

    def page_of(
        self, catalog: Catalog, path: str, query: dict[str, str], scope: Scope | None, as_json: bool
    ) -> Response:
        runs = Runs(catalog, self.converter)
        if path == "/assets":
            data = pages.assets_page(
                catalog,
                query,
                scope,
                self.selectors,
                self.converter.resolver,
                self.converter.options.job_namespace_prefix,
            )
            return self.render("assets.html", data, as_json, query)
        if path.startswith("/assets/"):
            asset_id = path[len("/assets/") :]
            data = pages.asset_page(catalog, runs, asset_id, query, scope, self.selectors)
            return self.render("asset.html", data, as_json, query)
        if path == "/health":
            return self.render("health.html", pages.health_page(catalog, query, scope, self.selectors), as_json, query)
        if path == "/neighbours":
            return self.render("neighbours.html", pages.neighbours_page(catalog, query, scope), as_json, query)
        if path == "/lineage":
            return self.render(
                "lineage.html", pages.lineage_page(catalog, query, scope, self.selectors), as_json, query
            )
        if path == "/runs":
            return self.render("runs.html", pages.runs_page(runs, query, scope), as_json, query)
        if path.startswith("/runs/"):
            data = pages.run_page(catalog, runs, path[len("/runs/") :], scope)
            return self.render("run.html", data, as_json, query)
        if path == "/status":
            return self.render("status.html", pages.status_page(catalog, scope), as_json, query)
        raise NotFoundError(f"no page at {path}")

    def render(self, template: str, data: dict[str, Any], as_json: bool, query: dict[str, str]) -> Response:
        if as_json:
            return Response("200 OK", json_bytes(json_twin(data)), content_type="application/json")
        linked: dict[str, Any] = dict(query)
        if "meta" in query:  # its filters linked as they came, a parameter each
            linked["meta"] = pages.metadata_filters(query)
        text = self.templates.get_template(template).render(data=data, query=linked, tokens=bool(self.tokens))
        return Response("200 OK", text.encode())

    def error(self, as_json: bool, status: str, message: str, *, again: str | None = None) -> Response:
        code = int(status.split()[0])
        if as_json:
            body = orjson.dumps({"ok": False, "error": message, "status": code})
            return Response(status, body, content_type="application/json")
        text = self.templates.get_template("error.html").render(
            status=status, message=message, query={}, tokens=bool(self.tokens), again=again
        )
        return Response(status, text.encode())

    def static(self, name: str) -> Response:
        suffix = name[name.rfind(".") :] if "." in name else ""
        if "/" in name or name.startswith(".") or suffix not in STATIC_TYPES:
            return self.error(False, "404 Not Found", "no such file")
        resource = importlib.resources.files("bridge.web") / "static" / name
        if not resource.is_file():
            return self.error(False, "404 Not Found", "no such file")
        return Response("200 OK", resource.read_bytes(), content_type=STATIC_TYPES[suffix])

    # --- tokens -----------------------------------------------------------------------------

    def find_token(self, secret: str) -> NamedToken | None:
        found = None
        for token in self.tokens:  # every one compared, in constant time
            if hmac.compare_digest(token.token.encode(), secret.encode()):
                found = token
        return found

    def token_of(self, environ: Environ) -> NamedToken | None:
        given = bearer(environ.get("HTTP_AUTHORIZATION", ""))
        if given is not None:
            return self.find_token(given)
        for part in environ.get("HTTP_COOKIE", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and value:
                return self.find_token(unquote(value))
        return None

    def login(self, environ: Environ, method: str, query: dict[str, str]) -> Response:
        target = safe_next(query.get("next", "/assets"))
        message = ""
        if method == "POST":
            try:
                length = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = -1
            if length < 0:
                return self.error(False, "400 Bad Request", "Content-Length must be a number of bytes")
            if length > MAX_FORM:
                return self.error(False, "413 Content Too Large", "the form is too large")
            try:
                body = environ["wsgi.input"].read(length)
            except OSError:  # the client silent past the server's read timeout, or gone
                return self.error(False, "408 Request Timeout", "the form did not arrive in time")
            form = parse_qs(body.decode("utf-8", "replace"))
            target = safe_next(form.get("next", [target])[0])
            token = self.find_token(form.get("token", [""])[0].strip())
            if token is not None:
                cookie = f"{COOKIE}={quote(token.token, safe='')}; Path=/; HttpOnly; SameSite=Strict"
                return redirect(target, (("Set-Cookie", cookie),))
            message = "That token is not known."
        elif method not in ("GET", "HEAD"):
            return self.error(False, "405 Method Not Allowed", "GET or POST")
        text = self.templates.get_template("login.html").render(
            next=target, message=message, query={}, tokens=bool(self.tokens)
        )
        return Response("200 OK", text.encode())  # the form again, saying why


def _sent(environ: Environ, path: str) -> str:
    """The address asked for, as the browser sent it (the server's ``RAW_URI``): an id's ``%2F``
    stays encoded, where PATH_INFO has it decoded, so that a browser led back to it does not read
    an id's ``..`` as a step up; else ``path`` encoded again. Bytes outside ASCII are encoded."""
    raw = environ.get("RAW_URI", "").split("?", 1)[0]
    if raw.startswith("/"):  # the request line's bytes, read as Latin-1
        target = quote(raw.encode("latin-1", "replace"), safe="/%" + _SUB_DELIMS)
    else:
        target = quote(path, safe="/")
    return target + ("?" + environ["QUERY_STRING"] if environ.get("QUERY_STRING") else "")


_SUB_DELIMS = "!$&'()*+,;=:@-._~"  # what a path may hold as it is, with the slash and escapes


def safe_next(target: str) -> str:
    """Where to go after logging in: a path of this server, never another host, in printable
    ASCII alone (the links pages make are percent-encoded): a control character would end the
    Location header and start another, and a browser drops a tab or a line break from a URL, so
    that ``/<TAB>/host`` would lead to ``//host``."""
    if not _LOCAL_PATH.fullmatch(target) or target.startswith("//") or "\\" in target:
        return "/assets"
    return target


_LOCAL_PATH = re.compile(r"/[!-~]*")  # printable ASCII, no space


def redirect(target: str, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    return Response("303 See Other", b"", (("Location", target), *headers))


__all__ = ["UiApp", "asset_url", "json_twin", "link", "run_url"]
