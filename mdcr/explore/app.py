"""The server: a Flask application over one :class:`~mdcr.explore.pages.Explorer`, served
by werkzeug on 127.0.0.1 and a free port.

Routes (GET only; each page's JSON under ``/api``)::

    /                      overview          /api/overview
    /queries/<setup>       queries page      /api/queries/<setup>   (every row, no pages)
    /query?pool=&q=        one query         /api/query?pool=&q=
    /scatter/<setup>       two retrievers    /api/scatter/<setup>

Nothing else is served: no static folder, no path from a request reaches the file system
(a request names a setup, pool, query, retriever or measure, each looked up among the
result's own). An unknown one is a 404 page (or JSON error) with one line; an error of
the server itself a 500 page with one line, never a traceback (``--debug`` prints it on
the terminal).
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from mdcr.core.errors import require
from mdcr.explore.pages import Explorer, NotFound

if TYPE_CHECKING:
    from flask import Flask
    from werkzeug.serving import BaseWSGIServer

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def templates_folder() -> str:
    return str(resources.files("mdcr.explore") / "templates")


def jinja_environment() -> Any:
    """The templates, for the static export (the server's own Jinja environment is
    Flask's, over the same folder)."""
    jinja2 = require("jinja2")
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_folder()),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
    )


class ServedLinks:
    """The server's URLs (flask.url_for; query strings built by werkzeug)."""

    def overview(self) -> str:
        from flask import url_for

        return str(url_for("overview"))

    def queries(self, setup: str, **params: Any) -> str:
        from flask import url_for

        return str(url_for("queries", setup=setup, **_kept(params)))

    def query(self, pool_id: str, query_id: str, **params: Any) -> str:
        from flask import url_for

        return str(url_for("query", pool=pool_id, q=query_id, **_kept(params)))

    def scatter(self, setup: str, **params: Any) -> str:
        from flask import url_for

        return str(url_for("scatter", setup=setup, **_kept(params)))


def _kept(params: dict[str, Any]) -> dict[str, Any]:
    """The parameters a URL carries: none empty, no first page."""
    return {k: v for k, v in params.items() if v not in (None, "") and not (k == "page" and v == 1)}


def create_app(explorer: Explorer, *, debug: bool = False) -> Flask:
    """The Flask application serving ``explorer``'s pages and their JSON."""
    flask = require("flask")
    app = flask.Flask("mdcr.explore", template_folder=templates_folder(), static_folder=None)
    app.jinja_env.undefined = require("jinja2").StrictUndefined
    app.json.sort_keys = False
    links = ServedLinks()

    def page(template: str, build: Callable[[], dict[str, Any]]) -> Any:
        return flask.render_template(template, page=build(), static=False, home=links.overview())

    def data(build: Callable[[], dict[str, Any]]) -> Any:
        return flask.jsonify(_json(build()))

    args = lambda: flask.request.args  # noqa: E731

    @app.get("/")
    def overview() -> Any:
        return page("overview.html", lambda: explorer.overview(links))

    @app.get("/api/overview")
    def api_overview() -> Any:
        return data(lambda: explorer.overview(links))

    @app.get("/queries/<setup>")
    def queries(setup: str) -> Any:
        return page("queries.html", lambda: explorer.queries(setup, args(), links))

    @app.get("/api/queries/<setup>")
    def api_queries(setup: str) -> Any:
        return data(lambda: explorer.queries(setup, args(), links, paged=False))

    @app.get("/query")
    def query() -> Any:
        pool, q = _unit_args(args())
        return page("query.html", lambda: explorer.query(pool, q, args(), links))

    @app.get("/api/query")
    def api_query() -> Any:
        pool, q = _unit_args(args())
        return data(lambda: explorer.query(pool, q, args(), links))

    @app.get("/scatter/<setup>")
    def scatter(setup: str) -> Any:
        return page("scatter.html", lambda: explorer.scatter(setup, args(), links))

    @app.get("/api/scatter/<setup>")
    def api_scatter(setup: str) -> Any:
        return data(lambda: explorer.scatter(setup, args(), links))

    def wants_json() -> bool:
        return flask.request.path.startswith("/api/")

    def error(code: int, message: str) -> Any:
        if wants_json():
            return flask.jsonify({"error": message, "status": code}), code
        home = links.overview()
        body = flask.render_template(
            "error.html",
            code=code,
            message=message,
            home=home,
            title=explorer.result.title,
            static=False,
        )
        return body, code

    @app.errorhandler(NotFound)
    def not_found(exc: NotFound) -> Any:
        return error(404, str(exc))

    @app.errorhandler(404)
    def no_route(exc: Exception) -> Any:
        return error(404, f"no page '{flask.request.path}'; the pages start at /")

    @app.errorhandler(405)
    def not_allowed(exc: Exception) -> Any:
        return error(405, f"{flask.request.method} is not allowed: this server is read-only")

    @app.errorhandler(Exception)
    def failed(exc: Exception) -> Any:
        code = getattr(exc, "code", None)
        if isinstance(code, int) and 400 <= code < 500:
            return error(code, getattr(exc, "description", str(exc)))
        if debug:
            traceback.print_exc(file=sys.stderr)
        return error(500, f"the page could not be made ({type(exc).__name__}: {exc})")

    return app


def _unit_args(args: Any) -> tuple[str, str]:
    pool, q = args.get("pool"), args.get("q")
    if not pool or not q:
        raise NotFound("a query page needs ?pool=POOL_ID&q=QUERY_ID (links on the queries pages)")
    return str(pool), str(q)


def _json(value: Any) -> Any:
    """A page's data as JSON values (Markup as its HTML text, pieces as dicts)."""
    from dataclasses import asdict, is_dataclass

    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, str | int | float | bool) or value is None:
        return value if not hasattr(value, "__html__") else str(value)
    if hasattr(value, "item"):
        return value.item()
    return str(value)


@dataclass
class Server:
    """A running server: its URL, and how to stop it."""

    url: str
    wsgi: BaseWSGIServer
    thread: threading.Thread | None = None

    def stop(self) -> None:
        if self.thread is not None:
            self.wsgi.shutdown()
            self.thread.join()
        self.wsgi.server_close()


def make_server(explorer: Explorer, host: str = "127.0.0.1", port: int = 0, *,
                debug: bool = False) -> Server:  # fmt: skip
    """A server for ``explorer`` bound to ``host`` and ``port`` (0: a free one), not yet
    serving; ``Server.url`` is where it will answer."""
    import logging

    serving = require("werkzeug.serving")
    if not debug:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
    wsgi = serving.make_server(host, port, create_app(explorer, debug=debug), threaded=True)
    shown = f"[{host}]" if ":" in host else host
    return Server(f"http://{shown}:{wsgi.server_port}/", wsgi)


@contextmanager
def serving(explorer: Explorer, host: str = "127.0.0.1", port: int = 0) -> Iterator[Server]:
    """A server answering in a background thread while the block runs (tests, the
    benchmark, screenshots); stopped and closed after it."""
    server = make_server(explorer, host, port)
    server.thread = threading.Thread(target=server.wsgi.serve_forever, daemon=True)
    server.thread.start()
    try:
        yield server
    finally:
        server.stop()
