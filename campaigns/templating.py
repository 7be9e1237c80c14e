"""The bounded Jinja sandbox every message template is checked and rendered in.

A template is the campaign author's code, run once per recipient, so a hostile or
careless one must fail fast with a clear reason instead of pinning a worker or filling
its memory. The limits, checked in the rendering thread as it goes (no extra process):

- time: every loop iteration checks a wall-clock deadline (:data:`RENDER_SECONDS` for one
  message), so nested loops that print nothing stop too; ``range`` gives at most
  :data:`MAX_RANGE` numbers;
- size: no string or list a template builds (``*``, ``+``, ``~`` into a namespace,
  ``replace``, ``join``, ``map``, padding widths, ``format``) nor the rendered text may
  exceed :data:`MAX_OUTPUT_CHARS` (a list counts its items' characters too, so a list of
  references to one long text cannot be multiplied past it); lists and dicts cannot grow
  in place (Jinja's immutable sandbox); ``**`` is limited to :data:`MAX_POWER_BITS` bits;
- nesting: a template nested past Python's parser (``{{ ((((...)))) }}``) or calling itself
  too deeply is an error, and spintax may nest :data:`MAX_SPINTAX_DEPTH` groups deep.

A limit hit raises :class:`RenderLimit` (a :class:`RenderError` whose reason names the limit).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar, Token
from typing import Any

from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace

#: wall-clock time one message may take to render
RENDER_SECONDS = 1.0
#: characters a rendered text, or any string or list a template builds, may have
MAX_OUTPUT_CHARS = 65_536
#: numbers ``range`` may give
MAX_RANGE = 10_000
#: bits an integer ``**`` may produce
MAX_POWER_BITS = 4_096
#: spintax groups inside groups (``{a|{b|{c|d}}}`` is 3)
MAX_SPINTAX_DEPTH = 20
_CHECK_EVERY = 64  # loop iterations between two looks at the clock


class RenderError(Exception):
    """A message that cannot be rendered for a recipient; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class RenderLimit(RenderError):
    """A template that went past a limit (time, size, nesting): the same for everyone."""


_deadline: ContextVar[float | None] = ContextVar("gatecast_render_deadline", default=None)


def start_budget(seconds: float = RENDER_SECONDS) -> Token[float | None] | None:
    """Start a render budget of ``seconds`` unless one runs already (then None); give the
    token back to :func:`end_budget` when the render ends."""
    if _deadline.get() is not None:
        return None
    return _deadline.set(time.monotonic() + seconds)


def end_budget(token: Token[float | None] | None) -> None:
    """End the budget :func:`start_budget` started (nothing for None)."""
    if token is not None:
        _deadline.reset(token)


def check_deadline() -> None:
    """Raise :class:`RenderLimit` when the current render budget is spent."""
    deadline = _deadline.get()
    if deadline is not None and time.monotonic() > deadline:
        raise RenderLimit(
            f"the template took longer than {RENDER_SECONDS:g} s to render (a loop too long?)"
        )


def check_size(value: Any, what: str = "the template") -> Any:
    """``value`` unchanged, unless it is a string or list longer than the limit."""
    if isinstance(value, str | list | tuple) and len(value) > MAX_OUTPUT_CHARS:
        raise RenderLimit(f"{what} builds a text longer than {MAX_OUTPUT_CHARS:,} characters")
    return value


def _too_long(length: int) -> None:
    if length > MAX_OUTPUT_CHARS:
        raise RenderLimit(f"the template builds a text longer than {MAX_OUTPUT_CHARS:,} characters")


def _bounded_loop(iterable: Iterable[Any]) -> Iterator[Any]:
    """What a ``{% for %}`` iterates: the items, with the clock checked as it goes."""
    check_deadline()
    for n, item in enumerate(iterable, 1):
        if n % _CHECK_EVERY == 0:
            check_deadline()
        yield item


def _range(*args: int) -> range:
    numbers = range(*args)
    if len(numbers) > MAX_RANGE:
        raise RenderLimit(f"range() gives at most {MAX_RANGE:,} numbers")
    return numbers


_range.__name__ = "range"  # as the template and its errors call it


def _weight(value: Any) -> int:
    """The characters a string or list stands for (a list: its items and their texts)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list | tuple):
        return len(value) + sum(len(x) for x in value if isinstance(x, str | list | tuple))
    return 0


def _multiply(left: Any, right: Any) -> Any:
    for seq, times in ((left, right), (right, left)):
        if isinstance(seq, str | list | tuple) and isinstance(times, int):
            _too_long(_weight(seq) * max(times, 0))
    return check_size(left * right)


def _add(left: Any, right: Any) -> Any:
    _too_long(_weight(left) + _weight(right))
    return left + right


def _bounded_items(items: Iterable[Any]) -> Iterator[Any]:
    """What ``map`` gives: its items, with the clock and their total size checked."""
    total = 0
    for n, item in enumerate(items, 1):
        total += _weight(item)
        _too_long(total)
        if n % _CHECK_EVERY == 0:
            check_deadline()
        yield item


def _power(left: Any, right: Any) -> Any:
    if isinstance(left, int) and isinstance(right, int) and right > 0:
        if abs(left) > 1 and abs(left).bit_length() * right > MAX_POWER_BITS:
            raise RenderLimit(f"a power larger than {MAX_POWER_BITS:,} bits")
    elif isinstance(right, int) and right > MAX_POWER_BITS:
        raise RenderLimit(f"a power larger than {MAX_POWER_BITS:,} bits")
    return left**right


# a width or precision of a million or more: "%999999s", "%.1000000f", "{:>999999}"
_PERCENT_WIDTH = re.compile(r"%[-#0 +]*(?:[0-9]{6,}|[0-9]*\.[0-9]{6,})")
_BRACE_WIDTH = re.compile(r"\{[^{}]*:[^{}]*[0-9]{6,}[^{}]*\}")


def _check_format(text: Any, args: Any = ()) -> None:
    """Refuse a format string (``%`` or ``str.format``) asking for an enormous width."""
    if isinstance(text, str) and (_PERCENT_WIDTH.search(text) or _BRACE_WIDTH.search(text)):
        raise RenderLimit("a format width or precision too large")
    _check_arguments("format", args if isinstance(args, tuple) else (args,), {})


def _format(left: Any, right: Any) -> Any:
    _check_format(left, right)
    return check_size(left % right)


class _BoundedNamespace(Namespace):
    """``namespace()``: a value set on it may not grow past the size limit."""

    def __setitem__(self, name: str, value: Any) -> None:
        super().__setitem__(name, check_size(value))


def _checked_call(func: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``func`` with its number arguments and its result kept under the size limit."""

    skip = 2 if hasattr(func, "jinja_pass_arg") else 1  # (context,) value: not checked

    def call(*args: Any, **kwargs: Any) -> Any:
        if name == "format":
            _check_format(args[skip - 1])
        _check_arguments(name, args[skip:], kwargs)
        return check_size(func(*args, **kwargs), f"the filter {name}")

    return _marked_like(call, func)


def _marked_like(wrapper: Callable[..., Any], func: Callable[..., Any]) -> Callable[..., Any]:
    """``wrapper`` with Jinja's pass_context/pass_eval_context mark of ``func``, if any."""
    mark = getattr(func, "jinja_pass_arg", None)
    if mark is not None:
        wrapper.jinja_pass_arg = mark  # type: ignore[attr-defined]
    return wrapper


def _check_arguments(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_OUTPUT_CHARS:
            raise RenderLimit(f"{name}: the number {value} is larger than a template may use")


def _estimate(name: str, obj: Any, args: tuple[Any, ...]) -> None:
    """Refuse a ``replace`` or ``join`` whose result would be past the size limit."""
    if name == "replace" and isinstance(obj, str) and len(args) >= 2:
        old, new = str(args[0]), str(args[1])
        count = obj.count(old) if old else len(obj) + 1
        _too_long(len(obj) + count * max(len(new) - len(old), 0))
    elif name == "join" and isinstance(obj, str) and args:
        items = args[0]
        if isinstance(items, list | tuple):
            _too_long(sum(len(str(x)) for x in items) + len(obj) * max(len(items) - 1, 0))


#: filters whose number arguments set the size of what they build
_SIZED_FILTERS = ("center", "indent", "wordwrap", "truncate", "batch", "slice", "format", "urlize")


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox (no ``list.append`` and the like) with the limits of this
    module (time, size, nesting)."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.globals["range"] = _range
        self.globals["namespace"] = _BoundedNamespace
        self.globals.pop("lipsum", None)
        self.binop_table = {
            **self.binop_table,
            "*": _multiply,
            "+": _add,
            "**": _power,
            "%": _format,
        }
        for name in _SIZED_FILTERS:
            self.filters[name] = _checked_call(self.filters[name], name)
        self.filters["replace"] = _checked_replace(self.filters["replace"])
        self.filters["join"] = _checked_join(self.filters["join"])
        self.filters["map"] = _checked_map(self.filters["map"])
        self.filters["gatecast_bounded_loop"] = _bounded_loop

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        """The template's tree with every ``{% for %}`` iterating through the clock check."""
        tree = super()._parse(source, name, filename)
        for loop in list(tree.find_all(nodes.For)):
            loop.iter = nodes.Filter(
                loop.iter, "gatecast_bounded_loop", [], [], None, None, lineno=loop.lineno
            )
        return tree

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """``text.format``/``format_map`` as the sandbox gives it, refused for huge widths."""
        if getattr(value, "__name__", "") in ("format", "format_map"):
            _check_format(getattr(value, "__self__", None))
        return super().wrap_str_format(value)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        """A call from a template: number arguments and the result under the size limit."""
        check_deadline()  # a macro calling itself twice stops in time too
        name = getattr(__obj, "__name__", "a function")
        _check_arguments(name, args, kwargs)
        _estimate(name, getattr(__obj, "__self__", None), args)
        return check_size(super().call(__context, __obj, *args, **kwargs), name)


def _checked_replace(func: Callable[..., Any]) -> Callable[..., Any]:
    def replace(eval_ctx: Any, s: Any, old: Any, new: Any, count: Any = None) -> Any:
        _estimate("replace", str(s), (old, new))
        return func(eval_ctx, s, old, new, count)

    return _marked_like(replace, func)


def _checked_map(func: Callable[..., Any]) -> Callable[..., Any]:
    def map_(*args: Any, **kwargs: Any) -> Any:
        return _bounded_items(func(*args, **kwargs))

    return _marked_like(map_, func)


def _checked_join(func: Callable[..., Any]) -> Callable[..., Any]:
    def join(eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> Any:
        items = list(value) if not isinstance(value, list | tuple) else value
        check_size(items, "join")
        if attribute is None:
            _estimate("join", str(d), (items,))
        return check_size(func(eval_ctx, items, d, attribute), "join")

    return _marked_like(join, func)


def spintax_depth(text: str) -> int:
    """How deep braces nest in ``text`` (unbalanced closing braces are ignored); a text
    with few braces is not scanned (its depth is at most their number)."""
    if text.count("{") <= MAX_SPINTAX_DEPTH:
        return text.count("{")
    depth = deepest = 0
    for ch in text:
        if ch == "{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == "}" and depth:
            depth -= 1
    return deepest


def nesting_problem(exc: BaseException) -> str | None:
    """The reason for a template too deeply nested for the parser or the compiler."""
    if isinstance(exc, RecursionError | MemoryError) or (
        isinstance(exc, SyntaxError) and "nested" in str(exc)
    ):
        return "the template is nested too deeply"
    return None


__all__ = [
    "MAX_OUTPUT_CHARS",
    "MAX_RANGE",
    "MAX_SPINTAX_DEPTH",
    "RENDER_SECONDS",
    "BoundedEnvironment",
    "RenderError",
    "RenderLimit",
    "check_deadline",
    "check_size",
    "end_budget",
    "nesting_problem",
    "spintax_depth",
    "start_budget",
]
