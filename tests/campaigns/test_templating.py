"""The bounded template sandbox: hostile templates fail fast with a reason naming the limit,
ordinary ones render as before."""

from __future__ import annotations

import random
import time

import pytest

from campaigns.campaign_file import CampaignFileError, parse_campaign
from campaigns.render import ContactData, RenderError, RenderLimit, render_message, render_text
from campaigns.templating import RENDER_SECONDS

LOOPS = "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}"
HOSTILE = {
    "a range too long": ("{% for i in range(10**9) %}x{% endfor %}", "range"),
    "nested loops printing nothing": (LOOPS, "longer than 1 s"),
    "loops over a long list": (
        "{% set r = range(10000)|list %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}",
        "longer than 1 s",
    ),
    "a string multiplied": ("{{ 'x' * 10**9 }}", "65,536 characters"),
    "a list multiplied then joined": ("{{ (['x'*60000]*60000)|join }}", "65,536 characters"),
    "str.join": ("{{ ''.join(['x'*60000]*60000) }}", "65,536 characters"),
    "a list of long texts multiplied": ("{{ (['x'*60000]*60000)|length }}", "65,536"),
    "a long text mapped many times": (
        "{{ range(10000)|map('string')|list|map('center', 60)|list|length }}",
        "65,536",
    ),
    "a huge power": ("{{ 2 ** (10**9) }}", "bits"),
    "a padding filter": ("{{ 'x'|center(10**9) }}", "larger than a template may use"),
    "a padding method": ("{{ 'x'.ljust(999999999) }}", "larger than a template may use"),
    "a % width": ("{{ '%999999999s' % 'x' }}", "format width"),
    "a format filter width": ("{{ '%.9999999f'|format(1.5) }}", "format width"),
    "a str.format width": ("{{ '{:>999999999}'.format('x') }}", "format width"),
    "a star width": ("{{ '%*s' % (10**9, 'x') }}", "larger than a template may use"),
    "a namespace doubling": (
        "{% set ns = namespace(s='x') %}{% for i in range(100) %}"
        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        "65,536 characters",
    ),
    "a replace blowing up": ("{{ ('x'*60000)|replace('x', 'y'*60000) }}", "65,536 characters"),
    "output printed in a loop": (
        "{% for i in range(10000) %}{{ 'x'*1000 }}{% endfor %}",
        "65,536 characters",
    ),
    "two long expressions": ("{{ 'x'*60000 }}{{ 'x'*60000 }}", "65,536 characters"),
    "a macro calling itself": ("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "nested"),
    "a macro doubling": (
        "{% macro f(n) %}x{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(40) }}",
        "",
    ),
    "parentheses nested deep": ("{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", "nested"),
    "statements nested deep": ("{% if 1 %}" * 3000 + "x" + "{% endif %}" * 3000, "nested"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_template_stops_quickly_with_the_limit_named(name: str) -> None:
    source, reason = HOSTILE[name]
    started = time.monotonic()
    with pytest.raises(RenderLimit) as caught:
        render_text(source, {"name": "Ann"}, random.Random(1))
    assert time.monotonic() - started < RENDER_SECONDS + 1.5, name
    assert reason in caught.value.reason, caught.value.reason


def test_spintax_nested_deep_by_a_contact_is_that_recipients_problem() -> None:
    spec = parse_campaign(
        {"name": "x", "list": "l", "message": {"type": "text", "text": "{Hi|Hello} {{ name }}"}}
    ).message
    hostile = ContactData(phone="+4915112345678", name="{a|" * 5000 + "b" + "}" * 5000)
    with pytest.raises(RenderError) as caught:
        render_message(spec, hostile, random.Random(1))
    assert not isinstance(caught.value, RenderLimit)
    assert caught.value.reason == "spintax nested deeper than 20 groups"
    text = render_message(spec, ContactData(name="Ann"), random.Random(1))
    assert getattr(text, "text", "") in ("Hi Ann", "Hello Ann")


def test_lists_cannot_grow_in_place() -> None:
    source = "{% set l = [] %}{% for i in range(10) %}{{ l.append('x') }}{% endfor %}"
    with pytest.raises(RenderError, match="'append' of 'list' object is unsafe"):
        render_text(source, {}, random.Random(1))


def test_ordinary_templates_render_as_before() -> None:
    source = (
        "Hi {{ name|upper }} {a|b} {% for i in range(3) %}{{ loop.index }}{% endfor %} "
        "{{ 'Order 123456: %s' % name }} {{ '{} 1234567'.format(name) }} "
        "{{ '%.2f'|format(3.14159) }} {{ ('x' * 3)|center(7) }} {{ 10 ** 20 }}"
        "{{ [1, 2]|join(',') }}{{ 'ab'|replace('a', 'c') }}"
    )
    out = render_text(source, {"name": "Ann"}, random.Random(1))
    assert out.startswith("Hi ANN ") and "123 Order 123456: Ann Ann 1234567 3.14" in out
    assert out.endswith(" 3.14   xxx   1000000000000000000001,2cb"), out


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{a|" * 30 + "b" + "}" * 30, "spintax nested deeper than 20 groups"),
        ("{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", "the template is nested too deeply"),
        ("{% if 1 %}" * 3000 + "x" + "{% endif %}" * 3000, "the template is nested too deeply"),
    ],
)
def test_a_campaign_file_with_deep_nesting_names_the_field(text: str, reason: str) -> None:
    with pytest.raises(CampaignFileError) as caught:
        parse_campaign({"name": "x", "list": "l", "message": {"type": "text", "text": text}})
    assert [(e.path, e.message) for e in caught.value.errors] == [("message.text", reason)]
