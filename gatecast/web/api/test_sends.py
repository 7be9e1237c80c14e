"""Test sends: a campaign's message sent now to one number or group, outside the campaign
(``campaigns.test_sends`` holds every rule). 404 unknown campaign or test, 409 refused
(opted out, no usable sender, deleted campaign), 422 a bad number or an unrenderable
message, 429 past the hourly limit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Request, Response, status
from pydantic import Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from campaigns import test_sends as domain
from campaigns.campaign_file import parse_campaign
from gatecast.web.api.common import (
    TEST_SEND_REFUSED,
    Id,
    Limit,
    Offset,
    Page,
    RequestBody,
    field_error,
    not_found,
)
from gatecast.web.auth import identify
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.idempotency import IDEMPOTENT, run_once
from gatecast.web.problems import Problem
from gatecast.web.sign_in_throttle import SignInThrottle

router = APIRouter(tags=["test sends"])
T = TypeVar("T")
Ctx = Annotated[AppContext, Depends(get_ctx)]


class TestSendRequest(RequestBody):
    """Where and how to send the test."""

    __test__ = False

    to: str = Field(
        min_length=1,
        max_length=64,
        description="A phone number (national numbers read in GATECAST_DEFAULT_REGION) or a "
        "group id ending in @g.us",
        examples=["+15550100"],
    )
    contact_id: Id | None = Field(
        None,
        description="Render the message for this contact (default: the contact with the "
        "number `to`, else the campaign's first recipient)",
    )
    sender: str | None = Field(
        None,
        max_length=64,
        description="The sender instance (default: the campaign's first usable one, else any)",
    )
    allow_opted_out: bool = Field(
        False, description="Send even when `to` belongs to a contact who opted out"
    )

    def ask(self) -> domain.TestAsk:
        """The domain's form of the request."""
        return domain.TestAsk(self.to, self.contact_id, self.sender, self.allow_opted_out)


@pydantic_dataclass(frozen=True)
class TestSendPublic(domain.TestSend):
    """A test send and its delivery state (sending, sent, delivered, read, failed,
    unknown); ``reason`` says a failure in plain words."""

    __test__ = False


_STATUS = {
    "not_found": status.HTTP_404_NOT_FOUND,
    "conflict": status.HTTP_409_CONFLICT,
    "too_many": status.HTTP_429_TOO_MANY_REQUESTS,
}


def _refused(exc: domain.TestSendRefused) -> Problem:
    if exc.kind == "invalid":
        return field_error(("body", exc.field), str(exc))
    return Problem(_STATUS[exc.kind], f"test_send_{exc.kind}", str(exc), field=exc.field)


def _through_gateway(ctx: AppContext, send: Callable[[domain.SupportsSend], T]) -> T:
    """``send(client)`` with a gateway client; a refusal as its problem answer."""
    with ctx.gateway() as client:
        try:
            return send(client)
        except domain.TestSendRefused as exc:
            raise _refused(exc) from None


def send_test(ctx: AppContext, campaign_id: int, body: TestSendRequest) -> TestSendPublic:
    """Make one test send (the dashboard's form calls this route)."""
    ask = body.ask()
    made = _through_gateway(
        ctx,
        lambda client: domain.send_test(
            ctx.engine,
            client,
            campaign_id,
            to=ask.to,
            contact_id=ask.contact_id,
            sender=ask.sender,
            allow_opted_out=ask.allow_opted_out,
            region=ctx.settings.default_region,
            now=ctx.clock(),
        ),
    )
    return TestSendPublic(**asdict(made))


@router.post(
    "/campaigns/{campaign_id}/test-sends",
    response_model=TestSendPublic,
    status_code=201,
    dependencies=[IDEMPOTENT],
    responses=TEST_SEND_REFUSED,
)
def post_test_send(campaign_id: Id, body: TestSendRequest, ctx: Ctx, request: Request) -> Response:
    """Send the campaign's rendered message now to one number or group (a test).

    Outside the campaign: no delivery row, no count, report, cap or outbound webhook.
    Its state then moves with the gateway's events (read it with GET).
    ``Idempotency-Key`` honoured: a repeat replays the first answer and sends nothing."""
    return run_once(
        request,
        ctx,
        body,
        lambda: send_test(ctx, campaign_id, body),
        status.HTTP_201_CREATED,
        "/api/v1/campaigns/{campaign_id}/test-sends/{id}",
    )


class DraftTestSendRequest(TestSendRequest):
    """A campaign file not created yet, and where and how to send its test."""

    __test__ = False

    spec: dict[str, Any] = Field(
        description="The campaign file's fields as JSON (what POST /campaigns takes)"
    )


@pydantic_dataclass(frozen=True)
class DraftTestSendPublic(domain.DraftTestSend):
    """A test send of a campaign file not created yet: sent, not stored (``state``
    ``sent``, or ``failed``/``unknown`` with ``reason`` in plain words)."""

    __test__ = False


def _draft_limit(request: Request) -> tuple[SignInThrottle, str]:
    """The hourly limit of the composer's test sends and whose count this request is."""
    limit = request.app.state.draft_test_limit
    assert isinstance(limit, SignInThrottle)
    who = identify(request)
    return limit, "" if who is None else f"{who.actor}\0{who.user_id}"


def send_draft_test(
    ctx: AppContext, request: Request, body: DraftTestSendRequest
) -> DraftTestSendPublic:
    """Make one test send of a campaign file (the composer's form calls this route)."""
    spec = parse_campaign(body.spec, "spec")
    limit, who = _draft_limit(request)
    wait = limit.retry_after(who)
    if wait is not None:
        raise Problem(
            status.HTTP_429_TOO_MANY_REQUESTS,
            "test_send_too_many",
            f"at most {domain.PER_HOUR} test sends an hour from the composer; "
            f"try again in {max(1, wait // 60)} min",
            field="to",
            headers={"Retry-After": str(wait)},
        )
    made = _through_gateway(
        ctx,
        lambda client: domain.send_draft_test(
            ctx.engine,
            client,
            spec,
            body.ask(),
            region=ctx.settings.default_region,
            now=ctx.clock(),
        ),
    )
    limit.failed(who)  # counts one send (the throttle's count of attempts)
    return DraftTestSendPublic(**asdict(made))


@router.post(
    "/campaigns/test-send",
    response_model=DraftTestSendPublic,
    status_code=201,
    dependencies=[IDEMPOTENT],
    responses=TEST_SEND_REFUSED,
)
def post_draft_test_send(body: DraftTestSendRequest, ctx: Ctx, request: Request) -> Response:
    """Send a campaign file's message now to one number or group before the campaign
    exists (the composer's **Send test**): rendered for ``contact_id`` (default: the
    contact with the number ``to``, else the audience's first recipient), with the rules
    of a created campaign's test send. Nothing is stored (no campaign, no test-send row):
    the answer says whether the gateway took it. At most 20 an hour per user (429).
    ``Idempotency-Key`` honoured: a repeat replays the first answer and sends nothing."""
    return run_once(
        request, ctx, body, lambda: send_draft_test(ctx, request, body), status.HTTP_201_CREATED
    )


@router.get("/campaigns/{campaign_id}/test-sends", response_model=Page[TestSendPublic])
def get_test_sends(
    campaign_id: Id, ctx: Ctx, limit: Limit = 20, offset: Offset = 0
) -> Page[TestSendPublic]:
    """The campaign's test sends, newest first."""
    page = domain.test_sends_page(ctx.engine, campaign_id, limit=limit, offset=offset)
    items = [TestSendPublic(**asdict(t)) for t in page.items]
    return Page[TestSendPublic](items=items, total=page.total, limit=limit, offset=offset)


@router.get("/campaigns/{campaign_id}/test-sends/{test_id}", response_model=TestSendPublic)
def get_test_send(campaign_id: Id, test_id: Id, ctx: Ctx) -> TestSendPublic:
    """One test send with its current delivery state."""
    found = domain.get_test_send(ctx.engine, campaign_id, test_id)
    if found is None:
        raise not_found("test send", test_id)
    return TestSendPublic(**asdict(found))
