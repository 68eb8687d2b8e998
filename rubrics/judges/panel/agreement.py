"""How much a panel's members agree: Fleiss' kappa over the items every member judged.

Kappa is 1 when the members always agree, about 0 when they agree as often as chance would make them (given how
often each says met), below 0 when less. It is undefined (None) without items, or when every vote is the same
answer (chance agreement is then 1).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PanelAgreement:
    members: list[str]
    items: int                 # items every member answered (the kappa's sample)
    kappa: float | None        # Fleiss' kappa over those items
    unanimous: float | None    # share of those items on which every member gave the same answer


def fleiss_kappa(votes: Sequence[Sequence[bool]]) -> float | None:
    """votes[i]: each member's met/unmet on item i (the same number of members on every item, at least two)."""
    if not votes:
        return None
    raters = len(votes[0])
    if raters < 2 or any(len(row) != raters for row in votes):
        raise ValueError("fleiss_kappa: every item needs the same number (at least 2) of votes")
    met_share = sum(sum(row) for row in votes) / (len(votes) * raters)
    chance = met_share ** 2 + (1.0 - met_share) ** 2
    if chance >= 1.0:
        return None
    observed = sum(_pairs_agreeing(sum(row), raters) for row in votes) / len(votes)
    return (observed - chance) / (1.0 - chance)


def _pairs_agreeing(met: int, raters: int) -> float:
    unmet = raters - met
    return (met * (met - 1) + unmet * (unmet - 1)) / (raters * (raters - 1))


def panel_agreement(item_members: Iterable[Sequence]) -> PanelAgreement | None:
    """The agreement of the members over items' MemberVerdict lists (ItemResult.members); None when no item was
    judged by a panel."""
    rows, names = [], None
    for members in item_members:
        if not members:
            continue
        names = names or [m.judge for m in members]
        if all(m.met is not None for m in members):
            rows.append([bool(m.met) for m in members])
    if names is None:
        return None
    unanimous = sum(1 for row in rows if len(set(row)) == 1) / len(rows) if rows else None
    return PanelAgreement(members=names, items=len(rows), kappa=fleiss_kappa(rows), unanimous=unanimous)


def describe(agreement: PanelAgreement) -> str:
    kappa = "undefined" if agreement.kappa is None else f"{agreement.kappa:.3f}"
    unanimous = "" if agreement.unanimous is None else f", unanimous on {agreement.unanimous:.0%}"
    return (f"panel agreement: Fleiss' kappa {kappa} over {agreement.items} items judged by all "
            f"{len(agreement.members)} members ({', '.join(agreement.members)}){unanimous}")
