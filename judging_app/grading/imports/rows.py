"""One row of a result list, checked: its query, system, rank and listing, with a URL kept only
when a page may show it (:func:`safe_url`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from qcat.errors import shown
from qcat.judging.grading.imports.files import FIELDS, REQUIRED, cell_text
from qcat.judging.grading.sessions import SEGMENTS, Listing, known_brand, known_price
from qcat.text.lines import query_too_long


@dataclass(frozen=True)
class Row:
    file: str
    line: int
    query: str
    system: str
    rank: int
    listing: Listing
    segment: str | None
    impressions: float | None


def safe_url(value: str, images: bool) -> str | None:
    """The URL when it is one a page may show (http/https, or an inline image), else None."""
    lowered = value.lower()
    if lowered.startswith(("http://", "https://")) or (images and lowered.startswith("data:image/")):
        return value
    return None


def checked_row(path: Path, number: int, record: dict, default_system: str) -> Row:
    """One usable row, or ValueError saying why not."""
    values = {name: record.get(name) for name in FIELDS}
    for name in REQUIRED:
        if not cell_text(values[name]):
            raise ValueError(f"no {name}")
    too_long = query_too_long(cell_text(values["query"]))
    if too_long:
        raise ValueError(f"query {too_long}")
    try:
        rank_value = float(values["rank"])
    except (TypeError, ValueError):
        raise ValueError(f"rank {shown(values['rank'])} is not a number") from None
    if not rank_value.is_integer() or rank_value < 1:
        raise ValueError(f"rank {shown(values['rank'])} is not a whole number of at least 1")
    segment = cell_text(values["segment"]).lower() or None
    if segment is not None and segment not in SEGMENTS:
        raise ValueError(f"segment {shown(values['segment'])} is not one of {', '.join(SEGMENTS)}")
    impressions = None
    if cell_text(values["impressions"]):
        try:
            impressions = float(values["impressions"])
        except (TypeError, ValueError):
            raise ValueError(f"impressions {shown(values['impressions'])} is not a number") from None
        if not math.isfinite(impressions) or impressions < 0:
            raise ValueError(f"impressions {shown(values['impressions'])} is not a non-negative number")
    price_text = cell_text(values["price"])
    price = known_price(price_text) if price_text else None
    if price_text and price is None:
        raise ValueError(f"price {shown(values['price'])} is not a non-negative number")
    image, link = cell_text(values["image_url"]), cell_text(values["link"])
    if image and safe_url(image, images=True) is None:
        raise ValueError(f"image_url {shown(image)} is not an http(s) or data:image URL")
    if link and safe_url(link, images=False) is None:
        raise ValueError(f"link {shown(link)} is not an http(s) URL")
    listing = Listing(cell_text(values["listing_id"]), cell_text(values["title"]), cell_text(values["category"]),
                      known_brand(values["brand"]), price, image or None, link or None)
    return Row(str(path), number, " ".join(cell_text(values["query"]).split()), cell_text(values["system"]) or default_system,
               int(rank_value), listing, segment, impressions)
