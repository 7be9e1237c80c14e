"""Dashboard pages. Reads come from the same functions as the API; actions call the API."""

from __future__ import annotations

import secrets
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from gatecast.web import roles, sessions
from gatecast.web.api.common import (
    INT64_MAX,
    Id,
    Offset,
    bad_cursor,
    refuse_unstorable_parameters,
)
from gatecast.web.audit import record_sign_in
from gatecast.web.auth import identify, sign_in, sign_out
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.dashboard.session import require_session, safe_next
from storage import states

templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))


def local_time(value: datetime | None, zone: str = "UTC", with_zone: bool = True) -> str:
    """``value`` in the IANA ``zone`` (a campaign's), the zone named: "2030-04-01 09:00
    Europe/Berlin (CEST)"; "" for None."""
    if value is None:
        return ""
    try:
        tz = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        tz, zone = ZoneInfo("UTC"), "UTC"
    local = value.astimezone(tz)
    if not with_zone:
        return f"{local:%Y-%m-%d %H:%M}"
    abbrev = local.tzname()
    named = zone if abbrev in (None, zone) or zone == "UTC" else f"{zone} ({abbrev})"
    return f"{local:%Y-%m-%d %H:%M} {named}"


templates.env.filters["local_time"] = local_time

router = APIRouter(include_in_schema=False)
page = APIRouter(
    include_in_schema=False,
    dependencies=[Depends(require_session), Depends(refuse_unstorable_parameters)],
)

Ctx = Annotated[AppContext, Depends(get_ctx)]


def render(request: Request, name: str, **context: Any) -> HTMLResponse:
    """Render ``name`` with the common layout variables (``me``: who is signed in, and
    ``can_change`` / ``is_admin``: what the page may offer)."""
    me = identify(request) if name != "login.html" else None
    role = me.role if me is not None else roles.VIEWER
    return templates.TemplateResponse(
        request,
        name,
        {
            "active": name.split(".")[0],
            "me": me,
            "can_change": role != roles.VIEWER,
            "is_admin": role == roles.ADMIN,
            **context,
        },
    )


def _id_or_none(text: str) -> int | None:
    """A filter's id from a query string ("" or anything not an id: no filter)."""
    return int(text) if text.isdigit() and 0 < int(text) < 2**63 else None


def _yes_no(text: str) -> bool | None:
    """A yes/no filter from a query string ("yes", "no"; anything else: no filter)."""
    return {"yes": True, "no": False}.get(text)


def _not_found(request: Request, what: str) -> HTMLResponse:
    """The not-found page, status 404, naming ``what`` ("campaign 7")."""
    response = render(request, "not_found.html", what=what)
    response.status_code = 404
    return response


@router.get("/login")
def login_form(request: Request, next: str = "/") -> HTMLResponse:
    """The sign-in page."""
    return render(request, "login.html", next=safe_next(next), error=None, user="")


@router.post("/login", response_model=None)
def login(
    request: Request,
    api_key: Annotated[str, Form(max_length=500)] = "",
    user: Annotated[str, Form(max_length=64)] = "",
    password: Annotated[str, Form(max_length=1024)] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    """Sign in with a user name and password, or with a key (the owner key or a user's);
    a wrong one shows the form again (401), and so does a sign-in from an address with
    too many recent failures (429, ``Retry-After``). Each attempt is in the audit log."""
    outcome = sign_in(request, api_key.strip(), name=user.strip(), password=password)
    if outcome.session_id is not None:
        record_sign_in(request, "sign-in", "ok", outcome.actor, outcome.role)
        redirect = RedirectResponse(safe_next(next), status_code=303)
        sessions.set_cookie(request, redirect, outcome.session_id)
        return redirect
    record_sign_in(request, "sign-in", "refused", outcome.actor or user.strip(), "")
    response = render(
        request, "login.html", next=safe_next(next), error=outcome.error, user=user.strip()
    )
    response.status_code = outcome.status
    if outcome.retry_after is not None:
        response.headers["Retry-After"] = str(outcome.retry_after)
    return response


@router.post("/logout")
def logout(request: Request) -> RedirectResponse:
    """Sign out: the session's record is deleted and the browser told to drop the cookie."""
    me = identify(request)
    if me is not None:
        record_sign_in(request, "sign-out", "ok", me.actor, me.role)
    sign_out(request)
    response = RedirectResponse("/login", status_code=303)
    sessions.clear_cookie(request, response)
    return response


@page.get("/")
def home() -> RedirectResponse:
    """The dashboard starts on the overview."""
    return RedirectResponse("/overview", status_code=303)


@page.get("/overview")
def overview_page(request: Request, ctx: Ctx) -> HTMLResponse:
    """The overview: senders needing attention, what is sending now and why a campaign
    waits, replies waiting, today's sends per sender against its cap and warm-up."""
    from gatecast.web.api.overview import read_overview

    return render(
        request, "overview.html", ov=read_overview(ctx), state_labels=INSTANCE_STATE_LABELS
    )


#: how the Instances page names each stored state
#: campaigns a page of the dashboard's list shows
CAMPAIGNS_PER_PAGE = 50
#: saved segments a page of the dashboard's list shows
SEGMENTS_PER_PAGE = 50

INSTANCE_STATE_LABELS = {
    "created": "not linked",
    "waiting_scan": "waiting for the scan",
    "unconfirmed": "scanned? the first send confirms the link",
    "connected": "connected",
    "disconnected": "reconnecting",
    "logged_out": "logged out",
}


@page.get("/instances")
def instances_page(request: Request, ctx: Ctx) -> HTMLResponse:
    """Instances: state, QR code on request, operations, sends today against the cap."""
    from gatecast.web.api.instances import list_instance_rows

    return render(
        request,
        "instances.html",
        instances=list_instance_rows(ctx)[0],
        state_labels=INSTANCE_STATE_LABELS,
    )


#: contacts the dashboard's table shows per page
CONTACTS_PER_PAGE = 50


@page.get("/contacts")
def contacts_page(
    request: Request,
    ctx: Ctx,
    q: str = "",
    list_id: str = "",
    tag: str = "",
    opted_out: str = "",
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    start: Annotated[int, Query(ge=0, le=INT64_MAX)] = 1,
    page_number: Annotated[int, Query(alias="page", ge=1, le=10**9)] = 1,
) -> HTMLResponse:
    """Contacts: upload with a mapping preview, import results, lists, search with
    list/tag/opt-out filters and pages walked by cursor (``start``: the first row's
    number, for the words only; 0 unknown; ``page``: the old links, by offset), add a
    contact, opt-out."""
    from campaigns import contacts
    from campaigns.audiences import list_lists
    from campaigns.deployment_defaults import import_region
    from campaigns.paging import BadCursor
    from campaigns.phones import region_names

    state = _yes_no(opted_out)
    chosen = _id_or_none(list_id)
    error = None
    found: contacts.SearchPage | None
    offset = 0 if cursor is not None else (page_number - 1) * CONTACTS_PER_PAGE
    try:
        found = contacts.search(
            ctx.engine,
            contacts.Search(query=q, list_id=chosen, tag=tag or None, opted_out=state),
            limit=CONTACTS_PER_PAGE,
            offset=offset,
            cursor=cursor,
        )
    except contacts.ContactError as exc:  # an unknown tag: said on the page, the table empty
        error = str(exc)
        found = None
    except BadCursor as exc:
        raise bad_cursor(str(exc)) from None
    if offset:
        start = offset + 1
    elif found is not None and not found.prev_cursor:
        start = 1
    elif found is not None and cursor == "last":
        start = found.total - len(found.items) + 1 if found.total_exact else 0
    return render(
        request,
        "contacts.html",
        lists=list_lists(ctx.engine)[:1000],
        contacts=found,
        search_error=error,
        q=q,
        list_id=chosen,
        tag=tag,
        opted_out=opted_out,
        start=start,
        per_page=CONTACTS_PER_PAGE,
        default_region=import_region(ctx.engine, None, ctx.settings.default_region),
        regions=region_names(),
        add_key=f"contact-{secrets.token_urlsafe(18)}",
    )


@page.get("/contacts/{contact_id}")
def contact_page(request: Request, contact_id: Id, ctx: Ctx) -> HTMLResponse:
    """One contact: attributes, tags, lists, every message it got (state in plain words)
    and its replies; edit, tag, opt out or in."""
    from campaigns.contacts import detail

    found = detail(ctx.engine, contact_id)
    if found is None:
        return _not_found(request, f"contact {contact_id}")
    return render(request, "contact.html", c=found.contact, d=found)


@page.get("/campaigns")
def campaigns_page(
    request: Request,
    ctx: Ctx,
    q: str = "",
    state: str = "",
    archived: str = "no",
    offset: Offset = 0,
) -> HTMLResponse:
    """Campaigns with their state and progress: searched by name, filtered by state and
    archive mark (archived ones left out by default), 50 a page."""
    from campaigns.lifecycle import STATES
    from campaigns.service import ARCHIVED_FILTERS, list_campaigns

    archived = archived if archived in ARCHIVED_FILTERS else "no"
    found = list_campaigns(
        ctx.engine,
        state=state if state in STATES else None,
        name=q.strip()[:200] or None,
        archived=archived,
        limit=CAMPAIGNS_PER_PAGE,
        offset=offset,
    )
    from scheduler.holds import campaign_holds

    held = campaign_holds(ctx.engine, [c.id for c in found.items], ctx.clock())
    return render(
        request,
        "campaigns.html",
        campaigns=found,
        holds={cid: h.line() for cid, h in held.items() if h.line()},
        q=q,
        state=state if state in STATES else "",
        states=STATES,
        archived=archived,
        offset=offset,
        per_page=CAMPAIGNS_PER_PAGE,
    )


#: replies the inbox shows per page
REPLIES_PER_PAGE = 50


@page.get("/replies")
def replies_page(
    request: Request,
    ctx: Ctx,
    campaign_id: str = "",
    sender: str = "",
    opt_out: str = "",
    handled: str = "",
    offset: Offset = 0,
) -> HTMLResponse:
    """The replies inbox: incoming messages across campaigns, newest first, filtered by
    campaign, sender, opt-out and handled, 50 a page; an operator answers a reply or
    marks it handled there (``POST /api/v1/replies/{id}/answer``, ``.../handled``)."""
    from campaigns.replies import replies_page, reply_senders
    from campaigns.service import list_campaigns

    chosen = _id_or_none(campaign_id)
    found = replies_page(
        ctx.engine,
        campaign_id=chosen,
        sender=sender[:64] or None,
        opt_out=_yes_no(opt_out),
        handled=_yes_no(handled),
        limit=REPLIES_PER_PAGE,
        offset=offset,
    )
    return render(
        request,
        "replies.html",
        replies=found,
        campaigns=list_campaigns(ctx.engine, archived="any", limit=200).items,
        senders=reply_senders(ctx.engine),
        campaign_id=chosen,
        sender=sender[:64],
        opt_out=opt_out if opt_out in ("yes", "no") else "",
        handled=handled if handled in ("yes", "no") else "",
        offset=offset,
        per_page=REPLIES_PER_PAGE,
    )


@page.get("/campaigns/new")
def new_campaign_page(
    request: Request,
    ctx: Ctx,
    source: Annotated[int | None, Query(alias="from", ge=1, le=2**63 - 1)] = None,
    mode: str = "clone",
) -> HTMLResponse:
    """The composer: every message kind, audience, schedule, pace, retry and safety as a
    form or as the TOML campaign file, a phone preview per recipient and the final check.

    ``?from=ID`` opens it filled from campaign ID: a copy to create (``mode=clone``, the
    default), or the campaign itself to change (``mode=edit``, saved with ``PUT``).
    Each rendering carries a fresh idempotency key per form (hidden fields the scripts
    send as ``Idempotency-Key``), so submitting one rendering twice creates once.
    """
    from zoneinfo import available_timezones

    from campaigns.audiences import list_lists
    from campaigns.campaign_file import PaceSpec
    from campaigns.deployment_defaults import read_defaults
    from campaigns.editing import campaign_file, clone_spec
    from campaigns.segments import segments_page
    from campaigns.service import CampaignNotFound
    from gatecast.web.api.instances import list_instance_rows

    mode = "edit" if mode == "edit" and source is not None else "clone"
    defaults = read_defaults(ctx.engine)  # the form starts from the stored ones (decision 65)
    prefill = None
    if source is not None:
        try:
            spec = campaign_file(ctx.engine, source)
        except CampaignNotFound:
            return _not_found(request, f"campaign {source}")
        if mode == "clone":
            spec = clone_spec(spec)
        prefill = spec.model_dump(mode="json", exclude_none=True)
    response = render(
        request,
        "campaign_new.html",
        lists=list_lists(ctx.engine)[:1000],
        segments=segments_page(ctx.engine, limit=1000).items,
        instances=list_instance_rows(ctx)[0],
        timezones=sorted(available_timezones() - {"localtime", "Factory"}),
        prefill=prefill,
        default_pace=defaults.pace or PaceSpec(),
        default_window=defaults.window_text(),
        # the stored window's zone (null: the browser's), decision 65
        default_zone=defaults.window_zone(),
        mode=mode,
        source_id=source,
        form_key=f"form-{secrets.token_urlsafe(18)}",
        toml_key=f"toml-{secrets.token_urlsafe(18)}",
    )
    response.headers["Cache-Control"] = "no-store"  # "back" renders new keys
    return response


@page.get("/campaigns/{campaign_id}")
def campaign_page(request: Request, campaign_id: Id, ctx: Ctx) -> HTMLResponse:
    """One campaign: live progress, chart, actions, deliveries, report downloads."""
    from campaigns.service import CampaignNotFound, get_campaign
    from gatecast.web.api.campaigns import detail_public, hold_public
    from scheduler.holds import campaign_hold

    try:
        detail = detail_public(get_campaign(ctx.engine, campaign_id))
    except CampaignNotFound:
        return _not_found(request, f"campaign {campaign_id}")
    hold = hold_public(campaign_hold(ctx.engine, campaign_id, ctx.clock()))
    from campaigns.reports.summary import campaign_taps
    from campaigns.test_sends import STATES as TEST_STATES
    from gatecast.web.api.instances import list_instance_rows

    senders = [i for i in list_instance_rows(ctx)[0] if i.state == "connected"]
    return render(
        request,
        "campaign.html",
        campaign=detail,
        taps=campaign_taps(ctx.engine, campaign_id),
        hold=hold,
        delivery_states=states.ALL,
        senders=senders,
        test_states=TEST_STATES,
        per_page=RECIPIENTS_PER_PAGE,
        recurrence=_recurrence(detail.cron, detail.timezone, detail.start_at, ctx.clock()),
    )


def _recurrence(
    cron: str | None, tz: str, start_at: datetime | None, now: datetime
) -> dict[str, Any] | None:
    """A recurring campaign's rule in words and its next run (None: not recurring)."""
    if not cron:
        return None
    from campaigns.repeats import describe_repeat, read_repeat
    from scheduler.recurrence import upcoming_starts

    shape = read_repeat(cron)
    nxt = upcoming_starts(cron, tz, start_at, now, 1)
    summary = describe_repeat(shape) if shape else f"crontab {cron}"
    return {"summary": summary[:1].lower() + summary[1:], "next_run": nxt[0] if nxt else None}


#: recipients the campaign page shows per page
RECIPIENTS_PER_PAGE = 50


@page.get("/webhooks")
def webhooks_page(request: Request, ctx: Ctx) -> HTMLResponse:
    """Outbound webhook endpoints: add (the secret shown once), state, messages, change
    one, send a test event, change the secret (the new one shown once), the recent
    deliveries in words, replay, remove (decision 60)."""
    from campaigns.webhook_endpoints import EVENTS, attempts_page, endpoints_page, get_endpoint

    shown = []
    for listed in endpoints_page(ctx.engine, limit=100).items:
        endpoint = get_endpoint(ctx.engine, listed.id)
        log = attempts_page(ctx.engine, listed.id, limit=10)
        if endpoint is not None and log is not None:
            shown.append({**endpoint.__dict__, "attempts": log.items})
    return render(request, "webhooks.html", endpoints=shown, events=EVENTS, now=ctx.clock())


@page.get("/segments")
def segments_page(request: Request, ctx: Ctx, offset: Offset = 0) -> HTMLResponse:
    """Saved segments (50 a page) with their definitions; save one (its count shown when
    saved), count one now, delete one."""
    from campaigns.segments import segments_page as saved

    found = saved(ctx.engine, limit=SEGMENTS_PER_PAGE, offset=offset)
    return render(
        request,
        "segments.html",
        segments=found,
        offset=offset,
        per_page=SEGMENTS_PER_PAGE,
        save_key=f"segment-{secrets.token_urlsafe(18)}",
    )


@page.get("/auto-replies")
def auto_replies_page(request: Request, ctx: Ctx) -> HTMLResponse:
    """Auto-replies (reply rules, issue 32 item 3): what each answers and how often it
    did; an operator adds one (a word, a button tap, or any message outside business
    hours), switches one on or off, deletes one."""
    import calendar
    from zoneinfo import available_timezones

    from campaigns.reply_rules import DAYS, DEFAULT_LIMIT_HOURS, DEFAULT_PAUSE_HOURS, list_rules

    return render(
        request,
        "auto_replies.html",
        rules=list_rules(ctx.engine),
        days=DAYS,
        day_names=dict(zip(DAYS, calendar.day_name, strict=True)),
        limit_hours=DEFAULT_LIMIT_HOURS,
        pause_hours=DEFAULT_PAUSE_HOURS,
        timezones=sorted(available_timezones() - {"localtime", "Factory"}),
        save_key=f"rule-{secrets.token_urlsafe(18)}",
    )


#: media files a page of the media library shows
MEDIA_PER_PAGE = 50


@page.get("/media")
def media_page(request: Request, ctx: Ctx, offset: Offset = 0) -> HTMLResponse:
    """The media library: uploaded files (name, kind, size, uploaded when and by whom,
    the campaigns using each), newest first, 50 a page; upload one, open one, delete one
    no campaign that will still send uses."""
    from campaigns import media
    from campaigns.untrusted_files import size_text
    from gatecast.web.api.media import public

    items, total = media.listing(ctx.engine, limit=MEDIA_PER_PAGE, offset=offset)
    files = [
        {
            "m": m,
            "url": public(ctx, request, m, None).url,
            "size": size_text(m.size),
            "uses": media.uses(ctx.engine, m),
        }
        for m in items
    ]
    return render(
        request,
        "media.html",
        files=files,
        total=total,
        offset=offset,
        per_page=MEDIA_PER_PAGE,
        accepted=media.ACCEPTED,
        limits={
            k: size_text(media.kind_limit(k, ctx.settings.media_max_bytes)) for k in media.KINDS
        },
    )


@page.get("/settings")
def settings_page(request: Request, ctx: Ctx) -> HTMLResponse:
    """Settings: the defaults of new imports and campaigns (a form for admins, read-only
    for others) and facts of the deployment (public address, webhook secret set or not,
    gateway address), decision 65."""
    from zoneinfo import available_timezones

    from campaigns.phones import region_names
    from gatecast.web.api.settings import read_settings

    return render(
        request,
        "settings.html",
        s=read_settings(ctx),
        regions=region_names(),
        timezones=sorted(available_timezones() - {"localtime", "Factory"}),
    )


#: audit entries a page of the dashboard's log shows
AUDIT_PER_PAGE = 50


@page.get("/users")
def users_page(request: Request, ctx: Ctx) -> HTMLResponse:
    """Users (admins): add one, change a role, disable or enable, set a password, make
    a key (shown once), revoke one."""
    from campaigns.users import ROLES, keys_page
    from campaigns.users import users_page as listing

    return render(
        request,
        "users.html",
        users=listing(ctx.engine, limit=1000),
        keys=keys_page(ctx.engine, limit=1000).items,
        roles=ROLES,
        now=ctx.clock(),
    )


@page.get("/audit")
def audit_page(
    request: Request,
    ctx: Ctx,
    actor: Annotated[str, Query(max_length=100)] = "",
    action: Annotated[str, Query(max_length=200)] = "",
    outcome: str = "",
    offset: Offset = 0,
) -> HTMLResponse:
    """The audit log (admins), newest first, filtered by actor, action and outcome, 50 a
    page, with a CSV export of the same filter."""
    from urllib.parse import urlencode

    from campaigns.audit import OUTCOMES, AuditFilter, entries, names_of
    from gatecast.web.dashboard.audit_words import sentence, target_names

    where = AuditFilter(
        actor=actor.strip() or None,
        action=action.strip() or None,
        outcome=outcome if outcome in OUTCOMES else None,
    )
    shown = {"actor": where.actor, "action": where.action, "outcome": where.outcome}
    found = entries(ctx.engine, where, limit=AUDIT_PER_PAGE, offset=offset)
    names = target_names(found.items, lambda table, ids: names_of(ctx.engine, table, ids))
    return render(
        request,
        "audit.html",
        entries=found,
        sentences={e.id: sentence(e, names) for e in found.items},
        f=where,
        outcomes=OUTCOMES,
        query=urlencode({k: v for k, v in shown.items() if v}),
        offset=offset,
        per_page=AUDIT_PER_PAGE,
    )


router.include_router(page)
