"""``gatecast rules``: the reply rules, auto-replies to keywords, button taps and messages
outside business hours (the rules: ``campaigns.reply_rules``, as ``/api/v1/reply-rules``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gatecast.commands.common import fail, id_argument, open_engine_or_fail
from gatecast.commands.message import message_of, refused_input

if TYPE_CHECKING:
    from campaigns.reply_rules import Rule

console = Console()
rules_app = typer.Typer(
    help="Reply rules: answer a keyword, a button tap or any message outside business "
    "hours, once per person within a limit, through the paced path.",
    no_args_is_help=True,
)

KeywordOpt = Annotated[
    list[str] | None,
    typer.Option("--keyword", help="answer messages holding this word (repeatable)"),
]
MatchOpt = Annotated[
    str | None,
    typer.Option("--match", help="exact (the whole message), word (default) or prefix"),
]
ButtonOpt = Annotated[
    str | None, typer.Option("--button", help="answer a tap on this button or list-row id")
]
AwayOpt = Annotated[
    bool, typer.Option("--away", help="answer any message outside the --open hours")
]
OpenOpt = Annotated[
    list[str] | None,
    typer.Option("--open", help='business hours, e.g. "mon-fri 09:00-18:00" (repeatable)'),
]
ZoneOpt = Annotated[
    str | None, typer.Option("--timezone", help="the business hours' zone, e.g. Europe/Lisbon")
]
TextOpt = Annotated[str | None, typer.Option("--text", help="the answer's text ({{ name }} works)")]
MediaOpt = Annotated[
    str | None,
    typer.Option("--media", help="answer with a picture, video or document (URL; --text: caption)"),
]
MessageOpt = Annotated[
    str | None,
    typer.Option("--message", help="the answer as JSON, a campaign file's [message] (any type)"),
]
LimitOpt = Annotated[
    float | None,
    typer.Option("--limit-hours", help="at most one answer per person in this many hours (24)"),
]
PauseOpt = Annotated[
    float | None,
    typer.Option("--pause-hours", help="quiet for a person after an inbox answer (24)"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print as JSON")]


def _fields(options: dict[str, Any]) -> dict[str, Any]:
    """The rule's fields the command's options give (only those given)."""
    from campaigns.reply_rules import RuleError, parse_week

    keyword, match, button = options["keyword"], options["match"], options["button"]
    away, open_hours, timezone = options["away"], options["open_hours"], options["timezone"]
    text, message = options["text"], options["message"]
    fields: dict[str, Any] = {}
    triggers = [t for t, on in (("keyword", keyword), ("button", button), ("away", away)) if on]
    if len(triggers) > 1:
        fail("give one trigger: --keyword, --button or --away", 2)
    if triggers:
        fields["trigger"] = triggers[0]
    if keyword:
        fields["keywords"] = keyword
    if match is not None:
        fields["match"] = match
    if button is not None:
        fields["button_id"] = button
    if open_hours is not None or timezone is not None or away:
        try:
            days = parse_week(open_hours or [])
        except RuleError as exc:
            refused_input(exc)
        fields["hours"] = {"timezone": timezone or "", "days": days}
    answer = message_of(text, options["media"], message)
    if answer is not None:
        fields["message"] = answer
    for key in ("limit_hours", "pause_hours"):
        if options[key] is not None:
            fields[key] = options[key]
    return fields


def _as_dict(rule: Rule) -> dict[str, Any]:
    data = dict(rule.__dict__)
    for key in ("created_at", "updated_at"):
        data[key] = data[key].isoformat()
    return data


def _when(rule: Rule) -> str:
    """A rule's trigger in words."""
    if rule.trigger == "keyword":
        return f"{rule.match}: " + ", ".join(rule.keywords)
    if rule.trigger == "button":
        return f"tap on {rule.button_id}"
    hours = rule.hours or {}
    open_days = "; ".join(f"{d} {' '.join(h)}" for d, h in (hours.get("days") or {}).items())
    return f"outside {open_days or 'no hours'} ({hours.get('timezone')})"


def _print(rule: Rule, verb: str) -> None:
    console.print(f"reply rule {rule.id} '{escape(rule.name)}' {verb}: {escape(_when(rule))}")


@rules_app.command("list")
def list_cmd(as_json: JsonOpt = False) -> None:
    """The reply rules, with what triggers each and how many messages it answered."""
    from campaigns.reply_rules import list_rules

    engine = open_engine_or_fail()
    try:
        rules = list_rules(engine)
    finally:
        engine.dispose()
    if as_json:
        print(json.dumps([_as_dict(r) for r in rules], ensure_ascii=False))
        return
    if not rules:
        console.print("no reply rules")
        return
    table = Table("id", "name", "when", "answers with", "limit", "on", "answered")
    for r in rules:
        answer = str(r.message.get("text") or r.message.get("caption") or r.message.get("type"))
        table.add_row(
            str(r.id),
            escape(r.name),
            escape(_when(r)),
            escape(answer),
            f"{r.limit_hours:g} h",
            "yes" if r.enabled else "no",
            str(r.answers),
        )
    console.print(table)


@rules_app.command("add")
def add_cmd(
    name: Annotated[str, typer.Argument(help="what the rule is for")],
    keyword: KeywordOpt = None,
    match: MatchOpt = None,
    button: ButtonOpt = None,
    away: AwayOpt = False,
    open_hours: OpenOpt = None,
    timezone: ZoneOpt = None,
    text: TextOpt = None,
    media: MediaOpt = None,
    message: MessageOpt = None,
    limit_hours: LimitOpt = None,
    pause_hours: PauseOpt = None,
    disabled: Annotated[bool, typer.Option("--disabled", help="add it switched off")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Add a reply rule: one trigger (--keyword, --button or --away with --open and
    --timezone) and its answer (--text or --message). It answers messages that come in
    from now on; never an opt-out."""
    from campaigns.campaign_file import CampaignFileError
    from campaigns.reply_rules import RuleError, add_rule

    fields = _fields(locals())
    engine = open_engine_or_fail()
    try:
        rule = add_rule(engine, {"name": name, **fields, "enabled": not disabled})
    except (RuleError, CampaignFileError) as exc:
        refused_input(exc)
    finally:
        engine.dispose()
    if as_json:
        print(json.dumps(_as_dict(rule), ensure_ascii=False))
    else:
        _print(rule, "added")


@rules_app.command("edit")
def edit_cmd(
    rule_id: Annotated[int, id_argument("the rule's id (rules list)")],
    name: Annotated[str | None, typer.Option("--name", help="a new name")] = None,
    keyword: KeywordOpt = None,
    match: MatchOpt = None,
    button: ButtonOpt = None,
    away: AwayOpt = False,
    open_hours: OpenOpt = None,
    timezone: ZoneOpt = None,
    text: TextOpt = None,
    media: MediaOpt = None,
    message: MessageOpt = None,
    limit_hours: LimitOpt = None,
    pause_hours: PauseOpt = None,
    enabled: Annotated[
        bool | None, typer.Option("--enable/--disable", help="switch it on or off")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Change a reply rule: only the options given (the rest kept)."""
    from campaigns.campaign_file import CampaignFileError
    from campaigns.reply_rules import RuleError, RuleNotFound, edit_rule

    fields = _fields(locals())
    if name is not None:
        fields["name"] = name
    if enabled is not None:
        fields["enabled"] = enabled
    engine = open_engine_or_fail()
    try:
        rule = edit_rule(engine, rule_id, fields)
    except RuleNotFound as exc:
        fail(str(exc))
    except (RuleError, CampaignFileError) as exc:
        refused_input(exc)
    finally:
        engine.dispose()
    if as_json:
        print(json.dumps(_as_dict(rule), ensure_ascii=False))
    else:
        _print(rule, "changed")


@rules_app.command("delete")
def delete_cmd(rule_id: Annotated[int, id_argument("the rule's id (rules list)")]) -> None:
    """Delete a reply rule (the messages it sent stay)."""
    from campaigns.reply_rules import RuleNotFound, delete_rule

    engine = open_engine_or_fail()
    try:
        delete_rule(engine, rule_id)
    except RuleNotFound as exc:
        fail(str(exc))
    finally:
        engine.dispose()
    console.print(f"reply rule {rule_id} deleted")


def register(app: typer.Typer) -> None:
    """Add ``gatecast rules`` to the root app."""
    app.add_typer(rules_app, name="rules")
