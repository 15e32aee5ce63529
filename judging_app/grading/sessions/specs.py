"""What a session is made of before it is stored: the segments, a query's specification and its
listings (:class:`QuerySpec`, :class:`Listing`), and the budget split per segment."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

SEGMENTS = ("head", "torso", "tail")
TOP_N = 5
DEFAULT_QUERIES = 4500
SEARCH_BATCH = 2048  # queries searched at once: bounds the memory of a session of any size


@dataclass(frozen=True)
class Listing:
    listing_id: str
    title: str = ""
    category: str = ""
    brand: str | None = None  # None: not known
    price: float | None = None  # as in the catalog, which names no currency; None: not known
    image_url: str | None = None  # imported result lists (qcat.judging.grading.imports) only
    link: str | None = None
    answer: str = "top"  # a category session: which of the model's answers (qcat.judging.store.models.ANSWERS)


UNKNOWN_BRANDS = {"", "unknown"}


def known_brand(brand: object) -> str | None:
    """The catalog's brand, or None where it has none (empty, or the literal "Unknown")."""
    text = str(brand).strip() if brand is not None else ""
    return None if text.lower() in UNKNOWN_BRANDS else text


def known_price(price: object) -> float | None:
    """The catalog's price, or None where it has none (NaN, negative or not a number)."""
    try:
        value = float(price)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


@dataclass(frozen=True)
class QuerySpec:
    text: str
    segment: str
    baseline: list[Listing]
    target: list[Listing]
    impressions: float = 0.0


@dataclass
class BuiltQueries:
    queries: list[QuerySpec]
    stats: dict = field(default_factory=dict)


def split_evenly(total: int, parts: int = 3) -> list[int]:
    """``total`` as ``parts`` near-equal counts, the larger ones first (4500 -> 1500 each)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


