"""The REST API under ``/api/v1``: every route needs a key or a session, and a role the
route allows (``web.auth``, ``web.roles``)."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.routing import APIRoute

from gatecast.web.api import (
    audit,
    campaign_archive,
    campaigns,
    composer,
    contact_bulk,
    contact_manage,
    contacts,
    deliveries,
    imports,
    instances,
    lists,
    media,
    messages,
    overview,
    replies,
    reply_rules,
    reports,
    segments,
    settings,
    test_sends,
    users,
    webhook_endpoints,
)
from gatecast.web.api.common import (
    ERROR_RESPONSES,
    IN_PROGRESS,
    NOT_FOUND,
    refuse_unstorable_parameters,
)
from gatecast.web.auth import require_api_key
from gatecast.web.idempotency import IDEMPOTENT

router = APIRouter(
    prefix="/api/v1",
    dependencies=[Depends(require_api_key), Depends(refuse_unstorable_parameters)],
    responses=ERROR_RESPONSES,
)
for _module in (
    overview,
    composer,
    campaigns,
    campaign_archive,
    test_sends,
    messages,
    media,
    replies,
    reply_rules,
    reports,
    deliveries,
    contact_bulk,
    contact_manage,
    contacts,
    lists,
    segments,
    imports,
    instances,
    webhook_endpoints,
    users,
    audit,
    settings,
):
    for _route in _module.router.routes:
        # the OpenAPI summary of each operation: the first line of its docstring
        if isinstance(_route, APIRoute) and _route.summary is None and _route.description:
            _route.summary = _route.description.strip().splitlines()[0].rstrip(".")
        if isinstance(_route, APIRoute):
            # the errors a route can answer besides ERROR_RESPONSES: an id it may not find,
            # a repeat of an idempotency key still running
            if "{" in _route.path:
                _route.responses = {**NOT_FOUND, **_route.responses}
            if IDEMPOTENT in _route.dependencies:
                _route.responses = {**IN_PROGRESS, **_route.responses}
    router.include_router(_module.router)

__all__ = ["router"]
