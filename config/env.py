"""Readers of the environment for settings: each bad value stops start-up, naming it.

django-environ alone is lenient where it matters: `env.bool` reads any unknown word
("ture", "yes please") as False, `env.float` drops the characters it does not expect
("1e3" becomes 13.0) and `env.int` raises a bare ValueError that names no variable. These
readers parse strictly and raise ImproperlyConfigured with the variable's name and value.
"""

from __future__ import annotations

import math
import os

from django.core.exceptions import ImproperlyConfigured

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def _raw(name: str) -> str:
    return os.environ.get(name, "").strip()


def number(
    name: str,
    cast: type,
    default: float,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
) -> float:
    """Return the environment variable `name` as `cast` (int or float), else `default`.

    `minimum` (inclusive), `above` (exclusive) and `maximum` (inclusive) bound it. Raises
    ImproperlyConfigured naming the variable when the value is not a finite number of that
    type (an int variable refuses "2.5") or lies outside its bounds. Unset or blank: the
    default, unchecked.
    """
    raw = _raw(name)
    if raw == "":
        return default
    try:
        value = cast(raw)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value):
        kind = "an integer" if cast is int else "a number"
        raise ImproperlyConfigured(f"{name} must be {kind}, not {raw!r}")
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum:g}, not {raw}")
    if above is not None and value <= above:
        raise ImproperlyConfigured(f"{name} must be more than {above:g}, not {raw}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum:g}, not {raw}")
    return value


def flag(name: str, default: bool) -> bool:
    """Return the environment variable `name` as a boolean, else `default`.

    Accepts 1/true/yes/on and 0/false/no/off in any case; anything else raises
    ImproperlyConfigured naming the variable (a typo never silently means False).
    """
    raw = _raw(name)
    if raw == "":
        return default
    if raw.lower() in TRUE_WORDS:
        return True
    if raw.lower() in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(
        f"{name} must be one of 1/true/yes/on or 0/false/no/off, not {raw!r}"
    )


def choice(name: str, default: str, choices: set[str] | frozenset[str]) -> str:
    """Return the environment variable `name` if it is one of `choices`, else `default`.

    Raises ImproperlyConfigured naming the variable and the allowed values otherwise.
    """
    raw = _raw(name)
    if raw == "":
        return default
    if raw not in choices:
        allowed = ", ".join(repr(c) for c in sorted(choices))
        raise ImproperlyConfigured(f"{name} must be one of {allowed}, not {raw!r}")
    return raw


def names(name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """Return the environment variable `name` as comma-separated words (blanks dropped),
    else `default`. Raises ImproperlyConfigured naming the variable when a word holds
    anything but letters, digits and _ . - : / [ ] (names, hosts, prefixes or networks)."""
    raw = _raw(name)
    if raw == "":
        return default
    words = tuple(w.strip() for w in raw.split(",") if w.strip())
    bad = [w for w in words if not all(c.isalnum() or c in "_.-:/[]" for c in w)]
    if bad:
        raise ImproperlyConfigured(f"{name}: {bad[0]!r} is not a name, host or prefix")
    return words


def networks(name: str) -> tuple:
    """Return the environment variable `name` as comma-separated IP networks
    ("127.0.0.0/8,::1/128"; a bare address is one host), else (). Raises
    ImproperlyConfigured naming the variable and the bad item."""
    import ipaddress

    out = []
    for word in names(name, ()):
        try:
            out.append(ipaddress.ip_network(word.strip("[]"), strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {word!r} is not an IP network") from None
    return tuple(out)
