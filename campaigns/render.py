"""Per-recipient rendering: sandboxed Jinja2 over the contact's variables, then spintax.

Variables are ``name``, ``phone`` and every attribute the importer stored for the
contact (``name`` and ``phone`` win over attributes of the same key). A missing
variable is an error (:class:`RenderError`, StrictUndefined). Spintax ``{a|b|c}`` (nested
allowed) is resolved after Jinja, so variables inside spintax work; the choice comes from
the ``random.Random`` passed in, seeded per recipient (:func:`recipient_rng`) so the
preview shows exactly what is stored and sent. Rendering runs in
:class:`campaigns.templating.BoundedEnvironment` under its time, size and nesting limits.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateError, UndefinedError, meta

from campaigns.campaign_file import MessageSpec
from campaigns.templating import (
    MAX_OUTPUT_CHARS,
    MAX_SPINTAX_DEPTH,
    BoundedEnvironment,
    RenderError,
    RenderLimit,
    end_budget,
    nesting_problem,
    spintax_depth,
    start_budget,
)
from gateway import messages as gm

_env = BoundedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)


#: the variables every contact has, whatever was imported: what each holds
BUILT_IN_VARIABLES = {"name": "the contact's name", "phone": "the contact's phone number"}
#: the variable a message to a group reads (its name and phone are empty)
GROUP_VARIABLES = {"group": "the group's id"}


@dataclass(frozen=True)
class ContactData:
    """What a template can see of one recipient."""

    phone: str = ""
    name: str = ""
    attributes: Mapping[str, Any] = field(default_factory=dict)

    def variables(self) -> dict[str, Any]:
        """The template variables: the attributes, then ``name`` and ``phone``."""
        out = {str(k): v for k, v in self.attributes.items()}
        out["name"] = self.name
        out["phone"] = self.phone
        return out


def recipient_rng(campaign_id: int, target: str) -> random.Random:
    """The RNG of one recipient of one campaign: same seed on every run and preview."""
    digest = hashlib.sha256(f"{campaign_id}:{target}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@lru_cache(maxsize=512)
def _compile(source: str) -> tuple[Template, bool]:
    """The template, and whether it has statements that may print more than their
    expressions build (loops, macros): its output is then measured as it streams."""
    return _env.from_string(source), bool(_REPEATS.search(source))


_REPEATS = re.compile(r"\{%[-+]?\s*(?:for|macro|call)\b")


_TOO_LONG = f"the rendered text is longer than {MAX_OUTPUT_CHARS:,} characters"
_BRACES = re.compile(r"[{}]")
_SPIN_TOKENS = re.compile(r"[{}|]")


def _split_options(body: str) -> list[str] | None:
    """Split a spintax group body on top-level ``|``; None when there is no ``|``."""
    options: list[str] = []
    depth = 0
    start = 0
    for m in _SPIN_TOKENS.finditer(body):
        ch = m.group()
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            options.append(body[start : m.start()])
            start = m.end()
    if not options:
        return None
    options.append(body[start:])
    return options


def _matching_brace(text: str, open_at: int) -> int:
    depth = 0
    for m in _BRACES.finditer(text, open_at):
        if m.group() == "{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return m.start()
    return -1


def spin(text: str, rng: random.Random) -> str:
    """Resolve spintax: each ``{a|b|c}`` becomes one option, nested groups included.

    Braces without a top-level ``|`` and unbalanced braces are kept as they are; braces
    nested deeper than :data:`MAX_SPINTAX_DEPTH` raise :class:`RenderError` for this
    recipient (the campaign file's own texts are checked when it is parsed, so the depth
    came from the recipient's data).
    """
    if "{" not in text or "|" not in text:
        return text
    if spintax_depth(text) > MAX_SPINTAX_DEPTH:
        raise RenderError(f"spintax nested deeper than {MAX_SPINTAX_DEPTH} groups")
    return _spin(text, rng)


def _spin(text: str, rng: random.Random) -> str:
    if "{" not in text or "|" not in text:
        return text
    out: list[str] = []
    i = 0
    while True:
        open_at = text.find("{", i)
        if open_at < 0:
            out.append(text[i:])
            break
        out.append(text[i:open_at])
        close = _matching_brace(text, open_at)
        if close < 0:
            out.append(text[open_at:])
            break
        body = text[open_at + 1 : close]
        options = _split_options(body)
        if options is None:
            out.append("{" + _spin(body, rng) + "}")
        else:
            out.append(_spin(rng.choice(options), rng))
        i = close + 1
    return "".join(out)


def render_text(source: str, variables: Mapping[str, Any], rng: random.Random) -> str:
    """Render one template string: Jinja2 (sandboxed, strict) then spintax."""
    if not source:
        return ""
    if "{{" not in source and "{%" not in source:
        return spin(source, rng)
    try:
        template, repeats = _compile(source)
        # shared context: the variables plus the sandbox's globals, without Template.render's
        # per-call copies (2.5x faster; the sandbox checks live in the compiled code)
        context = template.new_context({**_env.globals, **variables}, shared=True)
        token = start_budget()
        try:
            chunks = template.root_render_func(context)
            rendered = _joined(chunks) if repeats else "".join(chunks)
            if len(rendered) > MAX_OUTPUT_CHARS:
                raise RenderLimit(_TOO_LONG)
        finally:
            end_budget(token)
    except RenderError:
        raise
    except UndefinedError as exc:
        message = exc.message or "undefined"
        if message.endswith(" is undefined"):
            message = message[: -len(" is undefined")]
        raise RenderError(f"missing variable {message}") from None
    except TemplateError as exc:
        raise RenderError(f"template error: {exc.message or type(exc).__name__}") from None
    except Exception as exc:  # a filter or attribute access failing on the data
        nested = nesting_problem(exc)
        if nested:
            raise RenderLimit(nested) from None
        raise RenderError(f"template error: {type(exc).__name__}: {exc}") from None
    return spin(rendered, rng)


def _joined(chunks: Iterator[str]) -> str:
    """The rendered chunks as one text, stopped at the size limit (loops watch the time)."""
    out: list[str] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_OUTPUT_CHARS:
            raise RenderLimit(_TOO_LONG)
        out.append(chunk)
    return "".join(out)


def render_message(spec: MessageSpec, contact: ContactData, rng: random.Random) -> gm.Message:
    """The message for one recipient; raises :class:`RenderError` when it cannot render
    (:class:`RenderLimit` when the template goes past a limit)."""
    token = start_budget()
    try:
        return _render_message(spec, contact, rng)
    finally:
        end_budget(token)


def _render_message(spec: MessageSpec, contact: ContactData, rng: random.Random) -> gm.Message:
    v = contact.variables()

    def r(source: str) -> str:
        return render_text(source, v, rng)

    if spec.type == "text":
        return gm.Text(text=r(spec.text))
    if spec.type == "media":
        assert spec.media_url is not None
        return gm.Media(
            media_url=spec.media_url, caption=r(spec.media_caption), filename=spec.filename
        )
    if spec.type == "interactive":
        return gm.Interactive(
            text=r(spec.text),
            title=r(spec.title),
            subtitle=r(spec.subtitle),
            footer=r(spec.footer),
            buttons=tuple(
                gm.Button(
                    kind=b.kind,
                    display_text=r(b.display_text),
                    id=b.id,
                    url=b.url,
                    phone_number=b.phone_number,
                    copy_code=b.copy_code,
                )
                for b in spec.buttons
            ),
        )
    if spec.type == "template":
        return gm.LegacyTemplate(
            text=r(spec.text),
            footer=r(spec.footer),
            buttons=tuple(
                gm.TemplateButton(display_text=r(b.display_text), id=b.id or "")
                for b in spec.buttons
            ),
        )
    return gm.ListMessage(
        text=r(spec.text),
        title=r(spec.title),
        footer=r(spec.footer),
        button_text=r(spec.button_text),
        sections=tuple(
            gm.ListSection(
                title=r(s.title),
                rows=tuple(
                    gm.ListRow(
                        title=r(row.title), row_id=row.row_id, description=r(row.description)
                    )
                    for row in s.rows
                ),
            )
            for s in spec.sections
        ),
    )


def message_templates(spec: MessageSpec) -> list[str]:
    """Every text of ``spec`` that is rendered per recipient (templates with spintax)."""
    out = [
        spec.text,
        spec.caption,
        spec.title,
        spec.subtitle,
        spec.footer,
        spec.button_text,
        *(b.display_text for b in spec.buttons),
    ]
    for section in spec.sections:
        out.append(section.title)
        out += [t for row in section.rows for t in (row.title, row.description)]
    return [t for t in out if t]


def template_variables(spec: MessageSpec) -> list[str]:
    """The variables ``spec``'s templates read (sorted; loop variables excluded)."""
    found: set[str] = set()
    for source in message_templates(spec):
        if "{{" in source or "{%" in source:
            found |= meta.find_undeclared_variables(_env.parse(source))
    return sorted(found - set(_env.globals))


def missing_variables(spec: MessageSpec, contact: ContactData) -> list[str]:
    """The variables ``spec`` reads that ``contact`` has no value for (they would not
    render: the recipient is skipped with "missing variable ...")."""
    have = contact.variables()
    return [v for v in template_variables(spec) if v not in have]


#: the most different spintax variants :func:`spintax_variants` looks for
MAX_VARIANTS = 8
_VARIANT_TRIES = 40


def spintax_variants(
    spec: MessageSpec, contact: ContactData, limit: int = MAX_VARIANTS
) -> list[dict[str, Any]]:
    """Up to ``limit`` different renderings of ``spec`` for ``contact`` (spintax picks
    differ by seed; the stored one is seeded by the campaign id and the target), as the
    gateway's message dicts. Raises :class:`RenderError` as :func:`render_message` does."""
    seen: list[dict[str, Any]] = []
    for seed in range(_VARIANT_TRIES):
        content = gm.message_to_dict(render_message(spec, contact, random.Random(seed)))
        if content not in seen:
            seen.append(content)
            if len(seen) >= limit:
                break
    return seen


__all__ = [
    "BUILT_IN_VARIABLES",
    "GROUP_VARIABLES",
    "MAX_VARIANTS",
    "ContactData",
    "RenderError",
    "RenderLimit",
    "message_templates",
    "missing_variables",
    "recipient_rng",
    "render_message",
    "render_text",
    "spin",
    "spintax_variants",
    "template_variables",
]
