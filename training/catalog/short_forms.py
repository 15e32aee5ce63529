"""Short forms of listing titles: the short queries shoppers type for a listing, as training text.

A title ("samsung galaxy s3 16gb pebble blue") is what a listing is called, not what people
search for ("samsung galaxy", "galaxy blue", "samsung blue"). Each rule turns a normalized
title into at most a few shorter forms; the title itself is never one of them:

=============== ========================================================================
rule            form
=============== ========================================================================
``lead2``       the first two tokens ("samsung galaxy")
``lead3``       the first three tokens ("samsung galaxy s3")
``nobrand``     the title without its brand, model numbers (tokens with a digit) and
                stop words, first three tokens ("galaxy pebble blue")
``brandnoun``   the brand plus the title's last word of letters ("samsung blue"); only
                for listings with a brand
``catgram``     up to two of the title's word pairs that are frequent in its category
                (in at least 3 of its listings and mostly there: at least half of the
                pair's listings are in this category)
=============== ========================================================================

``lead2`` is how the ``real-2tok`` test set is cut (:mod:`qcat.training.data.real_text`), so it can look
better on that set than on real queries; the other rules are there so that the choice does
not rest on it.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from qcat.errors import InputError

RULES = ("lead2", "lead3", "nobrand", "brandnoun", "catgram")
STOP_WORDS = frozenset("a an and & by for from in of on or the to with x - + pack set new".split())
NO_BRAND = frozenset(("", "unknown", "generic", "none", "na", "n/a", "unbranded", "no brand"))
CATGRAM_MIN_LISTINGS = 3  # a pair in fewer of its category's listings is not frequent there
CATGRAM_MIN_SHARE = 0.5  # the category's share of all listings with the pair
CATGRAM_PER_TITLE = 2


def check_rules(rules) -> tuple[str, ...]:
    """The rules named, in :data:`RULES` order; unknown names refused in one line."""
    rules = tuple(rules)
    if unknown := [r for r in rules if r not in RULES]:
        raise InputError(f"unknown short-form rule(s) {', '.join(unknown)}; expected some of {', '.join(RULES)}")
    return tuple(r for r in RULES if r in rules)


def parse_rules(text: str) -> tuple[str, ...]:
    """``--short-forms`` as given: comma-separated rule names, ``all`` or ``none``."""
    text = text.strip().lower()
    if text == "all":
        return RULES
    if text == "none":
        return ()
    names = [part.strip() for part in text.split(",")]
    if not any(names):
        raise InputError(f"--short-forms {text!r} names no rule: give some of {', '.join(RULES)}, all, or none")
    if "" in names:
        raise InputError(f"--short-forms {text!r} has an empty rule name between commas")
    return check_rules(names)


def _is_model_number(token: str) -> bool:
    return any(ch.isdigit() for ch in token)


def _lead(tokens: list[str], n: int) -> list[str] | None:
    return tokens[:n] if len(tokens) > n else None


def _nobrand(tokens: list[str], brand: list[str]) -> list[str] | None:
    drop = set(brand)
    rest = [t for t in tokens if t not in drop and t not in STOP_WORDS and not _is_model_number(t)]
    return rest[:3] or None


def _brandnoun(tokens: list[str], brand: list[str]) -> list[str] | None:
    if " ".join(brand) in NO_BRAND:
        return None
    words = [t for t in tokens if t.isalpha() and len(t) >= 3 and t not in STOP_WORDS and t not in brand]
    return brand + words[-1:] if words else None


def _pairs(tokens: list[str]) -> set[str]:
    return {f"{a} {b}" for a, b in zip(tokens, tokens[1:])
            if a not in STOP_WORDS and b not in STOP_WORDS and not _is_model_number(a) and not _is_model_number(b)}


def category_pairs(titles, categories) -> dict[str, dict[str, int]]:
    """Per category, the word pairs frequent there (``catgram``) with their listing counts, from
    the listings given."""
    in_category: dict[str, Counter] = defaultdict(Counter)
    overall: Counter = Counter()
    for title, category in zip(titles, categories):
        pairs = _pairs(title.split(" "))
        in_category[category].update(pairs)
        overall.update(pairs)
    return {category: {pair: n for pair, n in counts.items()
                       if n >= CATGRAM_MIN_LISTINGS and n >= CATGRAM_MIN_SHARE * overall[pair]}
            for category, counts in in_category.items()}


def short_forms(titles, brands, categories, rules=RULES, frequent: dict[str, dict[str, int]] | None = None
                ) -> dict[str, list[list[str]]]:
    """Rule -> per listing, its distinct short forms (normalized text, never the title itself).

    ``titles`` and ``brands`` are normalized; ``frequent`` is :func:`category_pairs` (computed
    from these listings when not given: pass the training listings' to cut held-out ones)."""
    rules = check_rules(rules)
    if "catgram" in rules and frequent is None:
        frequent = category_pairs(titles, categories)
    out: dict[str, list[list[str]]] = {rule: [] for rule in rules}
    for title, brand, category in zip(titles, brands, categories):
        tokens, brand_tokens = title.split(" "), brand.split(" ") if brand else []
        for rule in rules:
            if rule == "catgram":
                common = frequent.get(category, {})
                ranked = sorted((p for p in _pairs(tokens) if p in common), key=lambda p: (-common[p], p))
                forms = [p.split(" ") for p in ranked[:CATGRAM_PER_TITLE]]
            else:
                form = (_lead(tokens, 2) if rule == "lead2" else _lead(tokens, 3) if rule == "lead3"
                        else _nobrand(tokens, brand_tokens) if rule == "nobrand" else _brandnoun(tokens, brand_tokens))
                forms = [form] if form else []
            texts = list(dict.fromkeys(" ".join(f) for f in forms))
            out[rule].append([t for t in texts if t and t != title])
    return out
