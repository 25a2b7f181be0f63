"""Order models, rank them with ties, and cut the order into bands.

Methodology.md rule 9 ("bands, not ranks"): models are ordered by score and a new
band starts where the gap to the next model is at least the threshold (1.5
percentage points by default).  The alternative "ci_overlap" banding groups
models whose bootstrap intervals overlap the band leader's.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Literal

from .table import _id_key

#: Rule 9's default threshold in percentage points: the write-up chose 1.5 points as "the
#: margin our own corrections moved things". The one place the number is written;
#: settings.SNAGLIST_BAND_GAP defaults to it.
DEFAULT_BAND_GAP = 1.5

#: Scores closer than this (percentage points) are the same score.  It absorbs
#: floating error (0.1 + 0.2 != 0.3) so that neither a tie nor an exact-threshold
#: gap can be tipped by the last bit of a double.
TOLERANCE = 1e-9

Banding = Literal["gap", "ci_overlap"]
BANDINGS: tuple[str, ...] = ("gap", "ci_overlap")


@dataclass(frozen=True)
class Placement:
    """One model's place in a banded order.

    ``rank`` is competition ranking as text: tied models share ``"=N"``, the
    next model gets the position it would have had without the tie; an untied
    model is ``"N"``.  ``rank_number`` is the same N as int.  ``band`` 1 is the
    best band.  All three are None for a model without a score.
    """

    model_id: Hashable
    score: float | None
    band: int | None
    rank: str | None
    rank_number: int | None


def display_order(scores: Mapping[Hashable, float | None]) -> list[Hashable]:
    """Return model ids by score descending, then model id; unscored models last.

    The result depends only on the mapping's contents, never on its order.
    """
    scored = [m for m, s in scores.items() if s is not None]
    unscored = [m for m, s in scores.items() if s is None]
    scored.sort(key=lambda m: (-float(scores[m]), _id_key(m)))  # type: ignore[arg-type]
    unscored.sort(key=_id_key)
    return scored + unscored


def tie_groups(scores: Mapping[Hashable, float | None]) -> list[list[Hashable]]:
    """Split the scored models, in display order, into groups of equal score.

    Two scores within ``TOLERANCE`` of the group's first score are equal.
    """
    groups: list[list[Hashable]] = []
    for m in display_order(scores):
        s = scores[m]
        if s is None:
            continue
        if groups and abs(float(scores[groups[-1][0]]) - float(s)) <= TOLERANCE:  # type: ignore[arg-type]
            groups[-1].append(m)
        else:
            groups.append([m])
    return groups


def _placements(
    scores: Mapping[Hashable, float | None], groups: list[list[Hashable]], bands: list[int]
) -> list[Placement]:
    out: list[Placement] = []
    position = 1
    for group, band in zip(groups, bands, strict=True):
        label = f"={position}" if len(group) > 1 else str(position)
        for m in group:
            out.append(Placement(m, float(scores[m]), band, label, position))  # type: ignore[arg-type]
        position += len(group)
    for m in display_order(scores):
        if scores[m] is None:
            out.append(Placement(m, None, None, None, None))
    return out


def assign_bands(
    scores: Mapping[Hashable, float | None], gap: float = DEFAULT_BAND_GAP
) -> list[Placement]:
    """Rank models and cut them into bands by score gap; return placements in display order.

    ``scores``: {model_id: score in percent (0-100) or None}.  ``gap``: threshold in
    percentage points (>= 0).  A new band starts where the gap between
    consecutive scores is >= ``gap`` (methodology.md rule 9); a gap of exactly
    the threshold starts a new band, compared with ``TOLERANCE`` so floating
    error cannot tip it.  Tied models always share a band and an ``"=N"`` rank.
    Models with a None score get no band and no rank and come last.

    Raises ValueError for a negative or non-finite gap.
    """
    if not (gap >= 0) or gap == float("inf"):
        raise ValueError(f"band gap must be a finite number >= 0, got {gap!r}")
    groups = tie_groups(scores)
    bands: list[int] = []
    for i, group in enumerate(groups):
        if i == 0:
            bands.append(1)
            continue
        prev = float(scores[groups[i - 1][-1]])  # type: ignore[arg-type]
        here = float(scores[group[0]])  # type: ignore[arg-type]
        bands.append(bands[-1] + 1 if prev - here >= gap - TOLERANCE else bands[-1])
    return _placements(scores, groups, bands)


def assign_bands_ci_overlap(
    scores: Mapping[Hashable, float | None],
    intervals: Mapping[Hashable, tuple[float, float] | None],
) -> list[Placement]:
    """Rank models and band them by interval overlap with the band leader.

    Walking down the display order, the first model (tie group) of a band is its
    leader; a following model whose interval [low, high] (percent) overlaps the
    leader's interval joins the band, otherwise it starts a new band and leads
    it.  Tie groups are never split: a tie group joins if any member overlaps,
    and a tied leading group's interval is the union of its members'.  Models
    with a None score or None interval get no band.

    Raises ValueError if a scored model has no interval.
    """
    for m, s in scores.items():
        if s is not None and intervals.get(m) is None:
            raise ValueError(f"model {m!r} has a score but no interval")
    groups = tie_groups(scores)
    bands: list[int] = []
    leader: tuple[float, float] | None = None
    for group in groups:
        ivs = [intervals[m] for m in group]
        union = (min(iv[0] for iv in ivs), max(iv[1] for iv in ivs))  # type: ignore[index]
        joins = leader is not None and any(
            iv[0] <= leader[1] + TOLERANCE and iv[1] >= leader[0] - TOLERANCE  # type: ignore[index]
            for iv in ivs
        )
        if joins:
            bands.append(bands[-1])
        else:
            bands.append(bands[-1] + 1 if bands else 1)
            leader = union
    return _placements(scores, groups, bands)


def established_tiers(
    order: list[Hashable],
    bands: Mapping[Hashable, int | None],
    rank_numbers: Mapping[Hashable, int | None],
    supported: Mapping[tuple[Hashable, Hashable], bool | None],
    few_counted: frozenset[Hashable] | set[Hashable] = frozenset(),
) -> dict[Hashable, int]:
    """Merge the bands into *tiers*: the order between tiers is one the data establish.

    Rule 9's bands cut the order where the score gap reaches the threshold, but a gap
    alone does not say the two models differ (issue 21's paired comparison often does
    not support the cut).  Walking down `order` (scored models, best first), a new tier
    starts between neighbours ``a`` and ``b`` only when all hold:

    * they are in different bands (``bands[a] != bands[b]``): a tier never splits a band;
    * the paired comparison of the two supports the boundary (``supported[(a, b)]`` is
      True; False or None, i.e. not supported or not tested, merge the bands);
    * they do not share a rank (``rank_numbers`` differ), so a shared rank such as "=1"
      never spans two tiers;
    * neither is in `few_counted` (fewer counted responses than the board's minimum), so
      a model counted on few responses never stands alone in a tier, at its head or
      anywhere else.

    Returns {model_id: tier}, tier 1 the best, for every model in `order`; an empty
    order gives {}.  Models absent from `order` (no score) get no tier.
    """
    out: dict[Hashable, int] = {}
    tier = 1
    for i, m in enumerate(order):
        if i:
            a = order[i - 1]
            starts = (
                bands.get(a) != bands.get(m)
                and supported.get((a, m)) is True
                and rank_numbers.get(a) != rank_numbers.get(m)
                and a not in few_counted
                and m not in few_counted
            )
            tier += 1 if starts else 0
        out[m] = tier
    return out
