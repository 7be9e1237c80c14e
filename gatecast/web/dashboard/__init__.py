"""The dashboard: server-rendered pages (Jinja2) with a little plain JavaScript."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from gatecast.web.dashboard import pages
from gatecast.web.dashboard.session import LoginRequired
from gatecast.web.problems import set_error_page

STATIC_DIR = Path(__file__).parent / "static"


def swagger_ui_dir() -> Path:
    """Swagger UI's files as shipped by the ``swagger-ui-py`` package (not imported)."""
    spec = find_spec("swagger_ui")
    if spec is None or spec.origin is None:
        raise RuntimeError("the swagger-ui-py package is missing: pip install swagger-ui-py")
    return Path(spec.origin).parent / "static"


def _error_page(request: Request, status: int, title: str, message: str) -> HTMLResponse:
    """An error as the dashboard's page (in its layout, with the menu)."""
    return pages.render(request, "error.html", title=title, message=message, status=status)


def install_dashboard(app: FastAPI) -> None:
    """Mount the dashboard pages, its static files and the /docs assets on ``app``."""
    app.mount("/static/vendor", StaticFiles(directory=swagger_ui_dir()))
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.include_router(pages.router)
    set_error_page(app, _error_page)

    @app.exception_handler(LoginRequired)
    def _to_login(request: Request, exc: LoginRequired) -> RedirectResponse:
        return RedirectResponse(f"/login?next={exc.next_path}", status_code=303)


__all__ = ["install_dashboard"]
