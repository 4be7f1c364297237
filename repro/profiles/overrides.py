"""``section.field=value`` strings (the ``train`` command's positional arguments) -> the keyword arguments of
:meth:`repro.profiles.profile.Profile.override`, each value parsed to its field's type.

Types: ``int``, ``float``, ``bool`` (``true``/``false``, ``1``/``0``, ``yes``/``no``), ``str``, ``X | None``
(``none`` for None), tuples (comma-separated items, e.g. ``eval.lengths=256,512``), and anything else as a
Python literal (``prolong.mix="{'code': 0.3}"``). A bad section, field or value is a ValueError naming it and what
is allowed; ranges are checked by the profile's own validation when the override is applied.
"""

from __future__ import annotations

import ast
import dataclasses
import types
import typing
from typing import Any, Sequence

from repro.profiles.profile import Profile

_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _sections() -> dict[str, type]:
    return {f.name: f.default_factory for f in dataclasses.fields(Profile) if f.name != "name"}  # type: ignore[misc]


def _parse(text: str, hint: Any, what: str) -> Any:
    """``text`` as a value of type ``hint`` (a ValueError naming ``what`` and the type when it is not one)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if type(None) in args and text.strip().lower() == "none":
            return None
        inner = [a for a in args if a is not type(None)]
        errors = []
        for a in inner:
            try:
                return _parse(text, a, what)
            except ValueError as e:
                errors.append(str(e))
        raise ValueError(errors[0] if len(errors) == 1 else
                         f"{what}={text!r} is not one of {' | '.join(map(_name, args))}")
    if hint is bool:
        low = text.strip().lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise ValueError(f"{what}={text!r} is not a bool; allowed: {', '.join(_TRUE + _FALSE)}")
    if hint in (int, float):
        try:
            return hint(text)
        except ValueError:
            kind = "an integer" if hint is int else "a number"
            raise ValueError(f"{what}={text!r} is not {kind}; allowed: {kind}") from None
    if hint is str:
        return text
    simple = (int, float, str, bool)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis and args[0] in simple:
        return tuple(_parse(t.strip(), args[0], what) for t in text.split(",") if t.strip())
    if origin is tuple and args and Ellipsis not in args and all(a in simple for a in args):
        parts = [t.strip() for t in text.split(",")]
        if len(parts) != len(args):
            raise ValueError(f"{what}={text!r} has {len(parts)} items; allowed: {len(args)} comma-separated items "
                             f"({', '.join(map(_name, args))})")
        return tuple(_parse(t, a, what) for t, a in zip(parts, args))
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        value = None
    if value is None or (origin is not None and not isinstance(value, origin)):
        raise ValueError(f"{what}={text!r} does not parse as {_name(hint)}; allowed: a Python literal of that type "
                         "(e.g. a tuple of pairs: \"(('code', 0.3), ('books', 0.7))\")")
    return value


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def parse_overrides(items: Sequence[str], locked: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """``["cdt.beta=3", "extend.steps=200"]`` -> ``{"cdt": {"beta": 3.0}, "extend": {"steps": 200}}``.
    ``locked``: ``section.field`` -> the flag that sets it instead (refused with that flag named)."""
    sections = _sections()
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        key, eq, text = item.partition("=")
        sec, dot, name = key.strip().partition(".")
        if not eq or not dot or not name:
            raise ValueError(f"profile override {item!r} does not parse; allowed: section.field=value "
                             "(e.g. cdt.beta=3)")
        if sec not in sections:
            raise ValueError(f"unknown profile section {sec!r} in {item!r}; allowed: {', '.join(sections)}")
        hints = typing.get_type_hints(sections[sec])
        names = [f.name for f in dataclasses.fields(sections[sec])]
        if name not in names:
            raise ValueError(f"unknown field {name!r} of section {sec!r} in {item!r}; allowed: {', '.join(names)}")
        if locked and f"{sec}.{name}" in locked:
            raise ValueError(f"{sec}.{name} is set by {locked[f'{sec}.{name}']}; allowed: that flag")
        out.setdefault(sec, {})[name] = _parse(text, hints[name], f"{sec}.{name}")
    return out
