"""The audit page in words: an entry as a sentence a person reads ("olga paused campaign
'November promo'") instead of its route ("POST /api/v1/campaigns/{campaign_id}/pause").

The route stays in the entry (the filter, the CSV export and the API show it); this is
only how the dashboard says it. Targets are named by their current names where the
entry holds an id (:func:`target_names`), else by kind and id ("contact 12").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from campaigns.audit import Entry

#: the table holding each kind of target that has a name, for :func:`target_names`
NAMED_TABLES = {
    "campaign": "campaigns",
    "list": "lists",
    "segment": "segments",
    "rule": "reply_rules",
    "user": "users",
    "webhook_endpoint": "webhook_endpoints",
    "endpoint": "webhook_endpoints",
}

#: how a target of each kind is called
NOUNS = {
    "campaign": "campaign",
    "contact": "contact",
    "import": "import",
    "media": "media file",
    "instance": "sender",
    "list": "list",
    "segment": "segment",
    "rule": "reply rule",
    "user": "user",
    "key": "API key",
    "api_key": "API key",
    "webhook_endpoint": "webhook endpoint",
    "endpoint": "webhook endpoint",
    "setting": "the deployment settings",
}

#: (to do, done) for a POST whose route ends in this part: an action on its target
ACTIONS = {
    "pause": ("pause", "paused"),
    "resume": ("resume", "resumed"),
    "cancel": ("cancel", "cancelled"),
    "retry": ("retry the failed messages of", "retried the failed messages of"),
    "archive": ("archive", "archived"),
    "unarchive": ("take out of the archive", "took out of the archive"),
    "clone": ("clone", "cloned"),
    "test-sends": ("send a test of", "sent a test of"),
    "erase": ("erase", "erased"),
    "opt-out": ("opt out", "opted out"),
    "opt-in": ("opt in", "opted in"),
    "link": ("link", "asked for the QR code to link"),
    "warmup": ("change the warm-up of", "changed the warm-up of"),
    "webhook": ("register the webhook of", "registered the webhook of"),
    "replay": ("replay the messages of", "replayed the messages of"),
    "rotate-secret": ("rotate the signing secret of", "rotated the signing secret of"),
    "test": ("send a test event to", "sent a test event to"),
    "keys": ("make an API key for", "made an API key for"),
    "tag": ("tag contacts", "tagged contacts"),
    "untag": ("untag contacts", "removed a tag from contacts"),
    "lists": ("add to a list", "added to a list"),
}

#: (to do, done) for a bulk action on contacts (``/contacts/bulk/<action>``): no one target
BULK = {
    "tag": ("tag contacts", "tagged contacts"),
    "add-to-list": ("add contacts to a list", "added contacts to a list"),
    "opt-out": ("opt out contacts", "opted out contacts"),
    "erase": ("erase contacts", "erased contacts"),
}

#: (to do, done) for a POST to a collection: a creation
CREATIONS = {
    "campaigns": ("create", "created"),
    "toml": ("create from a TOML file", "created from a TOML file"),
    "contacts": ("add", "added"),
    "imports": ("import contacts as", "imported contacts as"),
    "instances": ("add", "added"),
    "lists": ("create", "created"),
    "segments": ("save", "saved"),
    "users": ("add", "added"),
    "webhook-endpoints": ("add", "added"),
}

#: what a refused or failed answer's status means, said after the sentence
STATUS_WORDS = {
    400: "the request was malformed",
    403: "not allowed for this role",
    404: "not found",
    409: "not possible in its current state",
    413: "too large",
    422: "the input was refused",
    429: "too many attempts",
    500: "an error on the server",
    502: "the gateway did not answer",
    503: "not available right now",
}

EXPORTS = {
    "contacts": "exported the contacts",
    "audit": "exported the audit log",
}


def target_names(
    entries: Iterable[Entry], lookup: Callable[[str, list[int]], Mapping[int, str]]
) -> dict[tuple[str, str], str]:
    """The current name of each named target of ``entries``: ``{("campaign", "7"):
    "November promo"}``; ``lookup(table, ids)`` reads the names of a table's rows."""
    wanted: dict[str, set[int]] = {}
    for e in entries:
        table = NAMED_TABLES.get(e.target_type or "")
        if table and e.target_id and e.target_id.isdigit() and int(e.target_id) < 2**63:
            wanted.setdefault(table, set()).add(int(e.target_id))
    found: dict[tuple[str, str], str] = {}
    for kind, table in NAMED_TABLES.items():
        ids = wanted.get(table)
        if ids:
            for ident, name in lookup(table, sorted(ids)).items():
                found[(kind, str(ident))] = name
    return found


def _target(entry: Entry, names: Mapping[tuple[str, str], str]) -> str:
    kind = entry.target_type or ""
    noun = NOUNS.get(kind, kind.replace("_", " "))
    ident = entry.target_id or ""
    name = names.get((kind, ident))
    if name is not None:
        return f"{noun} '{name}'"
    if kind in ("user", "segment") and ident and not ident.isdigit():
        return f"{noun} '{ident}'"  # routes by name
    if kind == "instance" and ident:
        return f"{noun} '{ident}'"
    return f"{noun} {ident}".strip()


def _verbs(method: str, route: str) -> tuple[str, str] | None:
    parts = [p for p in route.split("/") if p]
    if not parts:
        return None
    last = parts[-1]
    if method == "POST" and not last.startswith("{"):
        if last in ACTIONS and len(parts) > 1:
            return ACTIONS[last]
        if last in CREATIONS:
            return CREATIONS[last]
    if method in ("PUT", "PATCH"):
        return ("change", "changed")
    if method == "DELETE":
        if len(parts) > 2 and parts[-2] == "keys":
            return ("revoke", "revoked")
        if len(parts) > 2 and parts[-2] == "lists":
            return ("remove from a list", "removed from a list")
        return ("delete", "deleted")
    return None


def _said_status(entry: Entry) -> str:
    words = STATUS_WORDS.get(entry.status or 0, "")
    code = f"{entry.status}" if entry.status else ""
    return ", ".join(filter(None, [words, code]))


def sentence(entry: Entry, names: Mapping[tuple[str, str], str]) -> str:
    """``entry`` as a sentence: "olga paused campaign 'November promo'"; a refused or
    failed change as what was tried and why it was not done."""
    who = entry.actor or "someone"
    action = entry.action
    if action in ("sign-in", "sign-out"):
        if entry.outcome == "ok":
            return f"{who} signed {'in' if action == 'sign-in' else 'out'}"
        return f"a sign-in as '{who}' was refused" if entry.actor else "a sign-in was refused"
    if action == "authentication":
        return f"a request with {who} was refused: the key is wrong, revoked or expired"
    replay = action.startswith("replay ")
    export = action.startswith("export ")
    method, _, route = action.removeprefix("replay ").removeprefix("export ").partition(" ")
    if not route.startswith("/"):  # a command-line entry: "campaign pause"
        target = f" ({_target(entry, names)})" if entry.target_type else ""
        done = "ran" if entry.outcome == "ok" else "tried to run"
        return f"{who} {done} 'gatecast {action}'{target}"
    route = route.removeprefix("/api/v1")
    if export:
        if "report" in route:
            return f"{who} downloaded the report of {_target(entry, names)}"
        return f"{who} {EXPORTS.get(route.strip('/').split('/')[0], 'exported ' + route)}"
    verbs = _verbs(method, route)
    target = _target(entry, names)
    if verbs is None:
        verbs = ("change", "changed")
    to_do, done = verbs
    if route.endswith(("/tag", "/untag")):
        target = ""
    if route.startswith("/contacts/bulk/"):
        verbs, target = BULK.get(route.rsplit("/", 1)[-1], verbs), ""
        to_do, done = verbs
    what = " ".join(filter(None, [done if entry.outcome == "ok" else to_do, target]))
    if entry.outcome == "ok":
        again = " (a repeated request: answered from the first, done once)" if replay else ""
        return f"{who} {what}{again}"
    why = _said_status(entry)
    return f"{who} tried to {what}: {entry.outcome}" + (f" ({why})" if why else "")
