"""The click simulator's queries: what shoppers search for and how they type it.

1. **Queries** come from listing titles and brands, as shoppers type them: brand-only
   ("lego"), product-type phrases taken from the end of a title's main segment ("usb
   cable", "jigsaw puzzle") and short category leaf names ("board games"), brand + type
   ("samsung bluetooth headset") and long specific queries (an ordered subset of 2-7 title
   tokens, model numbers included). Each listing that yields a query is one of its
   *generators*; a query's intent is spread over its generators' categories.
2. **Typos**: ``typo_rate`` of the distinct queries' tokens carry a typo (a letter swapped,
   dropped or doubled; one per typo'd query). A typo'd query is a separate query with
   ``typo_popularity`` of its source's searches; the search engine spell-corrects it, so
   it gets the results of its source query.
3. **Popularity** is Zipfian over queries ranked by their generators' weight (listing
   popularity) times a random factor, so short generic queries make the head and long
   specific ones the tail.

Each query is then typed in one or more raw forms (lower case mostly; a capital first
letter, commas or quotes now and then; Title Case too for the most popular), the *units*
whose searches :mod:`qcat.training.simulator.simulate_clicks` samples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from qcat.text.normalize import normalize, tokenize
from qcat.training.data.listings import Catalog
from qcat.training.simulator.simulate_config import SimulationConfig

KINDS = ("brand", "category", "type", "brand_type", "long")
STOPWORDS = frozenset(
    "a an and the of for with in on by to from at or & x is it its made new set pack pcs pc".split()
)
# Brand fields that name no brand.
NOT_BRANDS = frozenset(["unknown", "generic", "na", "n a", "none", "other", "no brand", "unbranded", "various"])
# Where a title's main segment ends: spaced dashes/bars/slashes, commas, brackets, "for"/"with".
_SEGMENT_END = re.compile(r"\s[-\u2013\u2014|/]\s|[,(\[{;]|\s(?:for|with|by|featuring|includes|inc)\s", re.IGNORECASE)


def brand_query(brand: str) -> str:
    """The brand-only query a listing's brand field makes ("" where it names no brand)."""
    query = normalize(brand)
    if not query or query in NOT_BRANDS or query.count(" ") >= 3:
        return ""
    return query


@dataclass
class Queries:
    """Distinct normalized queries with their generators (query, listing, weight) triples."""

    texts: list[str] = field(default_factory=list)
    kind: list[int] | np.ndarray = field(default_factory=list)
    position: dict[str, int] = field(default_factory=dict)
    gen_query: list[int] | np.ndarray = field(default_factory=list)
    gen_listing: list[int] | np.ndarray = field(default_factory=list)
    gen_weight: list[float] | np.ndarray = field(default_factory=list)
    score: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def add(self, text: str, kind: int, listing: int, weight: float) -> None:
        q = self.position.get(text)
        if q is None:
            q = self.position[text] = len(self.texts)
            self.texts.append(text)
            self.kind.append(kind)
        self.gen_query.append(q)
        self.gen_listing.append(listing)
        self.gen_weight.append(weight)

    def freeze(self) -> None:
        self.kind = np.asarray(self.kind, dtype=np.int64)
        self.gen_query = np.asarray(self.gen_query, dtype=np.int64)
        self.gen_listing = np.asarray(self.gen_listing, dtype=np.int64)
        self.gen_weight = np.asarray(self.gen_weight, dtype=np.float64)
        self.score = np.bincount(self.gen_query, weights=self.gen_weight, minlength=len(self.texts))


def _type_tails(shopper_title: str, brand_query: str) -> list[str]:
    """Candidate product-type phrases of a title: the last 1-3 word tokens of its main
    segment (the first segment that is not just the brand)."""
    segments = [s for s in _SEGMENT_END.split(shopper_title) if tokenize(s)]
    if not segments:
        return []
    main = segments[0]
    if len(segments) > 1 and normalize(main) == brand_query:
        main = segments[1]
    tokens = tokenize(main)
    run: list[str] = []
    for token in reversed(tokens):
        if len(run) == 3 or token in STOPWORDS or not token.replace("-", "").isalpha():
            break
        run.insert(0, token)
    return [" ".join(run[-n:]) for n in range(1, len(run) + 1)]


def _stem(token: str) -> str:
    return token[:-1] if len(token) > 3 and token.endswith("s") and not token.endswith("ss") else token


def _category_queries(paths: list[str], title_tokens: list[list[str]], max_tokens: int) -> dict[str, str]:
    """The leaf name of each category path as a query ("" if none): short names whose words
    (plural-insensitive) all occur in the category's titles, so shoppers could type them
    ("board games", "red wines"; not Best Buy's "enhanced features")."""
    words: dict[str, set[str]] = {}
    for path, tokens in zip(paths, title_tokens):
        words.setdefault(path, set()).update(_stem(t) for t in tokens)
    names = {}
    for path, path_words in words.items():
        name = normalize(path.rsplit(">", 1)[-1])
        tokens = name.split()
        fits = 0 < len(tokens) <= max_tokens and all(t in STOPWORDS or _stem(t) in path_words for t in tokens)
        names[path] = name if fits else ""
    return names


def generate_queries(catalog: Catalog, shopper_titles: list[str], title_tokens: list[list[str]],
                     weight: np.ndarray, config: SimulationConfig, rng: np.random.Generator) -> Queries:
    """The distinct queries of every kind (:data:`KINDS`) that the listings generate."""
    queries = Queries()
    kind_weight = dict(zip(KINDS, config.kind_weights))
    brands = [brand_query(b) for b in catalog.brand.tolist()]
    tails = [_type_tails(t, b) for t, b in zip(shopper_titles, brands)]
    tail_count: dict[str, int] = {}
    for listing_tails in tails:
        for tail in listing_tails:
            tail_count[tail] = tail_count.get(tail, 0) + 1
    types = [[t for t in listing_tails if tail_count[t] >= config.min_type_listings] for listing_tails in tails]

    for listing, brand in enumerate(brands):
        if brand:
            queries.add(brand, KINDS.index("brand"), listing, kind_weight["brand"] * weight[listing])
    names = _category_queries(catalog.category_path.tolist(), title_tokens, config.max_category_name_tokens)
    for listing, path in enumerate(catalog.category_path.tolist()):
        if names[path]:
            queries.add(names[path], KINDS.index("category"), listing, kind_weight["category"] * weight[listing])
    for listing, listing_types in enumerate(types):
        for phrase in listing_types:
            queries.add(phrase, KINDS.index("type"), listing, kind_weight["type"] * weight[listing])
    for listing, (brand, listing_types) in enumerate(zip(brands, types)):
        for phrase in listing_types[:2]:
            if brand and brand not in phrase:
                queries.add(f"{brand} {phrase}", KINDS.index("brand_type"), listing,
                            kind_weight["brand_type"] * weight[listing])
    for listing, text in _long_queries(title_tokens, config, rng):
        queries.add(text, KINDS.index("long"), listing, kind_weight["long"] * weight[listing])
    queries.freeze()
    return queries


def _long_queries(title_tokens: list[list[str]], config: SimulationConfig,
                  rng: np.random.Generator) -> list[tuple[int, str]]:
    """Ordered subsets of title tokens, sampled without replacement (Gumbel top-k) with
    weights that favour the start of the title and skip stop words."""
    n_listings = len(title_tokens)
    width = min(max((len(t) for t in title_tokens), default=1), 40)
    lengths = np.array([min(len(t), width) for t in title_tokens])
    position = np.arange(width)
    token_weight = np.where(position[None, :] < lengths[:, None], 1.0 / (1.0 + 0.08 * position[None, :]), 0.0)
    for listing, tokens in enumerate(title_tokens):
        for j, token in enumerate(tokens[:width]):
            if token in STOPWORDS:
                token_weight[listing, j] *= 0.1
            elif any(ch.isdigit() for ch in token):
                token_weight[listing, j] *= 1.2

    whole, fraction = divmod(config.long_queries_per_listing, 1.0)
    per_listing = int(whole) + (rng.uniform(size=n_listings) < fraction)
    variant_listing = np.repeat(np.arange(n_listings), per_listing)
    length_p = np.asarray(config.long_query_lengths, dtype=np.float64)
    target = rng.choice(len(length_p), size=len(variant_listing), p=length_p / length_p.sum())
    with np.errstate(divide="ignore"):
        keys = np.log(token_weight[variant_listing]) + rng.gumbel(size=(len(variant_listing), width))
    rank = np.argsort(np.argsort(-keys, axis=1, kind="stable"), axis=1, kind="stable")
    chosen = (rank < target[:, None]) & np.isfinite(keys)
    variant, position = np.nonzero(chosen)  # row-major: positions ascend within a variant
    bounds = np.searchsorted(variant, np.arange(len(variant_listing) + 1)).tolist()
    position = position.tolist()
    out = []
    for v, listing in enumerate(variant_listing.tolist()):
        if bounds[v] < bounds[v + 1]:
            tokens = title_tokens[listing]
            out.append((listing, " ".join([tokens[p] for p in position[bounds[v]:bounds[v + 1]]])))
    return out


def intents_from_generators(queries: Queries,
                            listing_category: np.ndarray) -> tuple[np.ndarray, np.ndarray, IntentShares]:
    """Per query: its intent listing and category, and each category's share of its intent."""
    n_categories = int(listing_category.max()) + 1
    gen_category = listing_category[queries.gen_listing]
    key = queries.gen_query * n_categories + gen_category
    pair_key, inverse = np.unique(key, return_inverse=True)
    pair_weight = np.bincount(inverse, weights=queries.gen_weight)
    pair_query, pair_category = np.divmod(pair_key, n_categories)
    share = pair_weight / queries.score[pair_query]

    # The intent category: the one with the largest share (ties: the smallest index).
    order = np.lexsort((pair_category, -share, pair_query))
    first = np.ones(len(order), dtype=bool)
    first[1:] = pair_query[order][1:] != pair_query[order][:-1]
    intent_category = pair_category[order][first]
    max_share = share[order][first]

    # The intent listing: the heaviest generator in the intent category (ties: lowest index).
    in_intent = gen_category == intent_category[queries.gen_query]
    rows = np.flatnonzero(in_intent)
    order = np.lexsort((queries.gen_listing[rows], -queries.gen_weight[rows], queries.gen_query[rows]))
    rows = rows[order]
    first = np.ones(len(rows), dtype=bool)
    first[1:] = queries.gen_query[rows][1:] != queries.gen_query[rows][:-1]
    intent_listing = queries.gen_listing[rows][first]
    return intent_listing, intent_category, IntentShares(pair_key, share / max_share[pair_query], n_categories)


@dataclass(frozen=True)
class IntentShares:
    """Sparse (query, category) -> intent share relative to the query's top category."""

    key: np.ndarray  # sorted query * n_categories + category
    relative_share: np.ndarray
    n_categories: int

    def lookup(self, query: np.ndarray, category: np.ndarray) -> np.ndarray:
        key = query * self.n_categories + category
        pos = np.minimum(np.searchsorted(self.key, key), len(self.key) - 1)
        return np.where(self.key[pos] == key, self.relative_share[pos], 0.0)


@dataclass(frozen=True)
class Typos:
    """Typo'd queries, new queries of their own."""

    texts: list[str]
    source: np.ndarray  # the clean query each typo'd query comes from


def _typo(token: str, rng: np.random.Generator) -> str:
    """A swap of two neighbouring letters, a dropped or a doubled letter (never the first)."""
    op = rng.integers(3)
    i = int(rng.integers(1, len(token) - 1))
    if op == 0 and token[i] != token[i + 1]:
        return token[:i] + token[i + 1] + token[i] + token[i + 2:]
    if op == 1:
        return token[:i] + token[i] + token[i:]
    return token[:i] + token[i + 1:]


def add_typos(texts: list[str], typo_rate: float, rng: np.random.Generator) -> Typos:
    """Typo'd copies (one token each) of a random share of the queries, chosen so that
    ``typo_rate`` of all query tokens (clean and typo'd queries together) carry a typo."""
    tokens = [t.split() for t in texts]
    eligible = [[j for j, tok in enumerate(toks) if len(tok) >= 4 and tok.isascii() and tok.isalpha()]
                for toks in tokens]
    mean_length = np.mean([len(t) for t in tokens]) if tokens else 1.0
    # v typo'd queries per clean query give v / ((1 + v) * mean_length) typo'd tokens.
    v = typo_rate * mean_length / max(1e-9, 1.0 - typo_rate * mean_length)
    candidates = np.flatnonzero([bool(e) for e in eligible])
    p = min(1.0, v * len(texts) / max(1, len(candidates)))
    picked = candidates[rng.uniform(size=len(candidates)) < p]
    existing = set(texts)
    out, source = [], []
    for q in picked.tolist():
        toks = list(tokens[q])
        j = eligible[q][int(rng.integers(len(eligible[q])))]
        toks[j] = _typo(toks[j], rng)
        text = " ".join(toks)
        if text not in existing:
            existing.add(text)
            out.append(text)
            source.append(q)
    return Typos(out, np.asarray(source, dtype=np.int64))


def zipf_volumes(score: np.ndarray, config: SimulationConfig) -> np.ndarray:
    """Yearly searches by popularity rank: proportional to (rank + offset) ** -exponent,
    ``total_searches`` in all (typo'd queries come on top)."""
    order = np.lexsort((np.arange(len(score)), -score))
    rank = np.empty(len(score), dtype=np.float64)
    rank[order] = np.arange(len(score))
    volume = (rank + 1.0 + config.zipf_offset) ** -config.zipf_exponent
    return volume * (config.total_searches / volume.sum())


@dataclass(frozen=True)
class Units:
    """What shoppers type: a raw text of a (clean or typo'd) query and its yearly searches."""

    raw: np.ndarray  # object
    query: np.ndarray  # int64: index into all queries (clean then typo'd)
    volume: np.ndarray  # float64


def _title_case(text: str) -> str:
    return " ".join(t[:1].upper() + t[1:] for t in text.split(" "))


def raw_units(texts: list[str], volume: np.ndarray, config: SimulationConfig, rng: np.random.Generator) -> Units:
    """Raw forms: most queries are typed in lower case, a few with a capital first letter,
    commas or quotes; the most popular ones are typed both in lower and in Title Case."""
    style = rng.uniform(size=len(texts))
    raw = []
    for text, u in zip(texts, style.tolist()):
        if not text.isascii() or u < 0.85:
            raw.append(text)
        elif u < 0.95:
            raw.append(text[:1].upper() + text[1:])
        elif " " in text and u < 0.975:
            raw.append(", ".join(text.split(" ")))
        else:
            raw.append(f'"{text}"')
    order = np.lexsort((np.arange(len(texts)), -volume))
    top = order[: config.cased_variants].tolist()
    cased = np.asarray([i for i in top if texts[i].isascii() and _title_case(texts[i]) != texts[i]], dtype=np.int64)
    for i in cased.tolist():
        raw[i] = texts[i]  # the lower-case form, distinct from the Title Case one
    unit_query = np.concatenate([np.arange(len(texts)), cased])
    unit_volume = np.concatenate([volume, volume[cased] * config.title_case_share])
    unit_volume[cased] *= 1.0 - config.title_case_share
    unit_raw = np.asarray(raw + [_title_case(texts[i]) for i in cased.tolist()], dtype=object)
    # Group each query's units together (lower-case form first) so the log reads by query.
    order = np.lexsort((np.arange(len(unit_query)), unit_query))
    return Units(unit_raw[order], unit_query[order], unit_volume[order])

