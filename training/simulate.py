"""Simulate a year of e-commerce search clicks over a real catalog.

No large public query log with clicks exists, so the demo click log is simulated on top of
the real listings (see DESIGN.md and eBay §4.1). The simulation, in order:

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
   specific ones the tail. Searches per month are Poisson around a seasonal profile.
4. **Search**: BM25 over the titles plus a small listing-popularity prior returns the top
   ``results_per_page`` listings.
5. **Clicks** (at most one per search, so clicks never exceed impressions): a result at rank
   ``r`` (0-based) is examined with probability ``1 / (1 + r) ** examination_decay`` and
   clicked with an attractiveness that grows with the share of the query's tokens in its
   title, with its category's share of the query's intent and with being the listing the
   query was written from. A further ``click_noise`` share of the clicks land on
   categories absent from the results (off-intent noise, which min_clicks mostly removes).

The log has one row per (raw query, category, month): ``date`` is a day inside the month,
``impressions`` the query's searches that month (the same on each category row of the
query-month) and ``clicks`` the clicks on the category's listings that month.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field, fields
from datetime import date, timedelta
from pathlib import Path

import duckdb
import numpy as np
from scipy.stats import rankdata

from qcat.errors import InputError
from qcat.normalize import normalize, tokenize
from qcat.taxonomy import Taxonomy
from training.catalog import Catalog
from training.search_index import SearchIndex, build_index, search  # noqa: F401  (SearchIndex: public re-export)

KINDS = ("brand", "category", "type", "brand_type", "long")
STOPWORDS = frozenset(
    "a an and the of for with in on by to from at or & x is it its made new set pack pcs pc".split()
)
# Brand fields that name no brand.
NOT_BRANDS = frozenset(["unknown", "generic", "na", "n a", "none", "other", "no brand", "unbranded", "various"])
# Where a title's main segment ends: spaced dashes/bars/slashes, commas, brackets, "for"/"with".
_SEGMENT_END = re.compile(r"\s[-\u2013\u2014|/]\s|[,(\[{;]|\s(?:for|with|by|featuring|includes|inc)\s", re.IGNORECASE)
# Seasonal demand by calendar month (e-commerce peaks before Christmas).
_SEASON = np.array([0.95, 0.9, 0.95, 0.95, 1.0, 0.95, 0.95, 1.0, 0.95, 1.05, 1.2, 1.4])


@dataclass(frozen=True)
class SimulationConfig:
    """Knobs of :func:`simulate_clicklog`; the defaults make the demo log.

    Size: ``long_queries_per_listing`` (expected long queries written from each listing) sets
    the number of distinct queries, ``total_searches`` the yearly search volume that the
    Zipf law (``zipf_exponent``, ``zipf_offset``) spreads over them.
    """

    seed: int = 0
    start_date: str = "2025-01-01"
    long_queries_per_listing: float = 7.5
    long_query_lengths: tuple[float, ...] = (0.0, 0.0, 0.06, 0.24, 0.30, 0.20, 0.12, 0.08)  # P(length = index)
    min_type_listings: int = 3  # a title-end phrase is a product type if this many listings end with it
    max_category_name_tokens: int = 3
    kind_weights: tuple[float, ...] = (1.0, 0.5, 1.0, 0.5, 0.2)  # per KINDS
    total_searches: float = 12_000_000
    zipf_exponent: float = 0.9
    zipf_offset: float = 30.0
    popularity_noise: float = 0.8  # sigma of the log-normal factor on query popularity
    listing_popularity_spread: float = 1.5  # log-ratio of the most to the least popular listing weight
    typo_rate: float = 0.02  # share of query tokens with a typo
    typo_popularity: float = 0.05  # searches of a typo'd query relative to its source
    cased_variants: int = 3000  # this many top queries are also typed in Title Case
    title_case_share: float = 0.3  # ... by this share of their searches
    results_per_page: int = 10
    search_popularity_weight: float = 1.0  # popularity prior added to BM25 (in BM25 units)
    examination_decay: float = 1.0
    # Click attractiveness: base + token match share + intent category share + intended listing.
    attractiveness: tuple[float, float, float, float] = (0.02, 0.12, 0.4, 0.25)
    max_ctr: float = 0.85  # cap on the expected clicks per search
    click_noise: float = 0.03  # share of clicks on off-intent categories
    noise_categories: int = 4  # off-intent categories a query's noise clicks go to


@dataclass(frozen=True, eq=False)
class QueryIntents:
    """What each generated (normalized) query means; golden data for evaluation.

    ``source_query`` is the query without typos (the spell-corrected form, equal to ``query``
    when ``n_typos`` is 0); ``intent_listing_id`` the listing the query was most likely
    written from and ``intent_category`` its intended category; ``kind`` one of
    :data:`KINDS`; ``searches`` its simulated searches over the year (0: never searched).
    """

    query: np.ndarray
    source_query: np.ndarray
    intent_listing_id: np.ndarray
    intent_category: np.ndarray
    kind: np.ndarray
    n_typos: np.ndarray
    searches: np.ndarray

    def __len__(self) -> int:
        return len(self.query)


@dataclass(frozen=True, eq=False)
class SimulatedLog:
    """A simulated click log: one row per (raw query, category, month)."""

    query: np.ndarray  # object: raw query text as typed
    category: np.ndarray  # object: taxonomy id
    date: np.ndarray  # object: ISO date inside the row's month
    impressions: np.ndarray  # int64: searches of the query that month
    clicks: np.ndarray  # int64 > 0
    intent: QueryIntents = field(repr=False)

    def __len__(self) -> int:
        return len(self.query)

    def columns(self) -> dict[str, np.ndarray]:
        return {"query": self.query, "category": self.category, "date": self.date,
                "impressions": self.impressions, "clicks": self.clicks}


# --------------------------------------------------------------------------- public API


def simulate_clicklog(catalog: Catalog, taxonomy: Taxonomy,
                      config: SimulationConfig = SimulationConfig()) -> SimulatedLog:
    """Simulate a year of search clicks over ``catalog``; deterministic in ``config.seed``."""
    listing_category = _listing_categories(catalog, taxonomy)
    engine = _SearchEngine.build(catalog, config)

    queries = _generate_queries(catalog, engine.shopper_titles, engine.title_tokens, engine.weight, config,
                                _rng(config, "queries"))
    intent_listing, intent_cat, shares = _intents(queries, listing_category)
    typos = _add_typos(queries.texts, config.typo_rate, _rng(config, "typos"))

    n_clean = len(queries.texts)
    texts = queries.texts + typos.texts
    source = np.concatenate([np.arange(n_clean), typos.source])
    popularity_rng = _rng(config, "popularity")
    clean_noise = popularity_rng.lognormal(0.0, config.popularity_noise, n_clean)
    clean_volume = _zipf_volumes(queries.score * clean_noise, config)
    typo_noise = popularity_rng.lognormal(0.0, 0.5, len(typos.source))
    typo_volume = clean_volume[typos.source] * config.typo_popularity * typo_noise
    volume = np.concatenate([clean_volume, typo_volume])

    results, matched, n_terms = engine.search(queries.texts, config.results_per_page)
    click_p, outcome_cat = _click_model(results, matched, n_terms, listing_category, intent_listing, shares,
                                        len(taxonomy), config, _rng(config, "noise"))

    units = _raw_units(texts, volume, config, _rng(config, "units"))
    log_rows = _sample_clicks(units, source, click_p, outcome_cat, len(taxonomy), config, _rng(config, "clicks"))
    searches = np.bincount(units.query, weights=log_rows.unit_searches, minlength=len(texts)).astype(np.int64)

    intent = QueryIntents(
        query=np.asarray(texts, dtype=object),
        source_query=np.asarray(queries.texts, dtype=object)[source],
        intent_listing_id=catalog.listing_id[intent_listing][source],
        intent_category=np.asarray(taxonomy.ids, dtype=object)[intent_cat][source],
        kind=np.asarray(KINDS, dtype=object)[queries.kind][source],
        n_typos=np.concatenate([np.zeros(n_clean, np.int64), np.ones(len(typos.texts), np.int64)]),
        searches=searches,
    )
    return SimulatedLog(
        query=units.raw[log_rows.unit],
        category=np.asarray(taxonomy.ids, dtype=object)[log_rows.category],
        date=log_rows.date,
        impressions=log_rows.impressions,
        clicks=log_rows.clicks,
        intent=intent,
    )


def simulated_search(catalog: Catalog, queries: list[str], config: SimulationConfig = SimulationConfig()) -> np.ndarray:
    """The listings (catalog row indices, -1 where fewer match) that the simulator's search
    engine shows for each (normalized, typo-free) query, best first: what
    :func:`simulate_clicklog` with the same catalog and config clicked on."""
    results, _, _ = _SearchEngine.build(catalog, config).search(list(queries), config.results_per_page)
    return results


def write_log(log: SimulatedLog, path: str | Path) -> None:
    """Write the log's five columns as Parquet (zstd), or as CSV if ``path`` ends in .csv."""
    _write_arrays(log.columns(), Path(path))


def write_intents(intents: QueryIntents, path: str | Path) -> None:
    """Write the per-query intents as Parquet (zstd), or as CSV if ``path`` ends in .csv."""
    _write_arrays({f.name: getattr(intents, f.name) for f in fields(intents)}, Path(path))


def catalog_brand_queries(catalog: Catalog) -> list[str]:
    """The normalized brand names the simulator searches as brand-only queries (sorted)."""
    brands = {_brand_query(b) for b in catalog.brand.tolist()}
    return sorted(b for b in brands if b)


# Independent random streams per step, so that each step's draws do not depend on the others.
_STREAMS = ("listings", "queries", "typos", "popularity", "noise", "units", "clicks")


def _rng(config: SimulationConfig, step: str) -> np.random.Generator:
    return np.random.default_rng([config.seed, _STREAMS.index(step)])


@dataclass(frozen=True)
class _SearchEngine:
    """The simulated site search: shopper-typed titles, listing demand and a BM25 index."""

    shopper_titles: list[str]
    title_tokens: list[list[str]]
    weight: np.ndarray  # relative demand per listing
    index: "SearchIndex"

    @classmethod
    def build(cls, catalog: Catalog, config: SimulationConfig) -> "_SearchEngine":
        shopper_titles = catalog.title.tolist()  # qcat.normalize drops what shoppers never type (™, ®)
        title_tokens = [tokenize(t) for t in shopper_titles]
        weight = _listing_weights(catalog, config, _rng(config, "listings"))
        index = build_index(title_tokens, _popularity_percentile(weight) * config.search_popularity_weight)
        return cls(shopper_titles, title_tokens, weight, index)

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return search(self.index, [q.split() for q in queries], k)


# --------------------------------------------------------------------------- listings


def _brand_query(brand: str) -> str:
    query = normalize(brand)
    if not query or query in NOT_BRANDS or query.count(" ") >= 3:
        return ""
    return query


def _listing_categories(catalog: Catalog, taxonomy: Taxonomy) -> np.ndarray:
    paths, inverse = np.unique(catalog.category_path.astype(str), return_inverse=True)
    ids = []
    for path in paths:
        node = taxonomy.id_of_path(path)
        if node is None:
            raise InputError(f"catalog category {path!r} is not in the taxonomy")
        ids.append(taxonomy.index(node))
    return np.asarray(ids, dtype=np.int64)[inverse]


def _popularity_percentile(values: np.ndarray) -> np.ndarray:
    return (rankdata(values, method="average") - 0.5) / len(values)


def _listing_weights(catalog: Catalog, config: SimulationConfig, rng: np.random.Generator) -> np.ndarray:
    """Relative demand per listing: the listing's popularity percentile within its source
    (random where the source has none), spread log-linearly, times log-normal noise."""
    percentile = rng.uniform(size=len(catalog))
    for source in np.unique(catalog.source.astype(str)):
        rows = np.flatnonzero((catalog.source == source) & np.isfinite(catalog.popularity))
        if len(rows) > 1:
            percentile[rows] = _popularity_percentile(catalog.popularity[rows])
    noise = rng.normal(0.0, 0.5, len(catalog))
    return np.exp(config.listing_popularity_spread * (percentile - 0.5) + noise)


# --------------------------------------------------------------------------- queries


@dataclass
class _Queries:
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


def _generate_queries(catalog: Catalog, shopper_titles: list[str], title_tokens: list[list[str]],
                      weight: np.ndarray, config: SimulationConfig, rng: np.random.Generator) -> _Queries:
    queries = _Queries()
    kind_weight = dict(zip(KINDS, config.kind_weights))
    brands = [_brand_query(b) for b in catalog.brand.tolist()]
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


def _intents(queries: _Queries, listing_category: np.ndarray) -> tuple[np.ndarray, np.ndarray, "_Shares"]:
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
    return intent_listing, intent_category, _Shares(pair_key, share / max_share[pair_query], n_categories)


@dataclass(frozen=True)
class _Shares:
    """Sparse (query, category) -> intent share relative to the query's top category."""

    key: np.ndarray  # sorted query * n_categories + category
    relative_share: np.ndarray
    n_categories: int

    def lookup(self, query: np.ndarray, category: np.ndarray) -> np.ndarray:
        key = query * self.n_categories + category
        pos = np.minimum(np.searchsorted(self.key, key), len(self.key) - 1)
        return np.where(self.key[pos] == key, self.relative_share[pos], 0.0)


@dataclass(frozen=True)
class _Typos:
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


def _add_typos(texts: list[str], typo_rate: float, rng: np.random.Generator) -> _Typos:
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
    return _Typos(out, np.asarray(source, dtype=np.int64))


def _zipf_volumes(score: np.ndarray, config: SimulationConfig) -> np.ndarray:
    """Yearly searches by popularity rank: proportional to (rank + offset) ** -exponent,
    ``total_searches`` in all (typo'd queries come on top)."""
    order = np.lexsort((np.arange(len(score)), -score))
    rank = np.empty(len(score), dtype=np.float64)
    rank[order] = np.arange(len(score))
    volume = (rank + 1.0 + config.zipf_offset) ** -config.zipf_exponent
    return volume * (config.total_searches / volume.sum())


# --------------------------------------------------------------------------- clicks


def _click_model(results: np.ndarray, matched: np.ndarray, n_terms: np.ndarray, listing_category: np.ndarray,
                 intent_listing: np.ndarray, shares: _Shares, n_categories: int, config: SimulationConfig,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per clean query, the probability that a search ends in a click on each outcome.

    Outcomes are the ``k`` result slots followed by ``noise_categories`` off-intent
    categories; returns ``p`` (Q, k + n) and the outcomes' categories (Q, k + n), -1 for
    empty slots.
    """
    n_queries, k = results.shape
    present = results >= 0
    result_cat = np.where(present, listing_category[np.maximum(results, 0)], -1)
    query = np.repeat(np.arange(n_queries), k).reshape(n_queries, k)
    base, w_match, w_intent, w_exact = config.attractiveness
    match = matched / np.maximum(n_terms, 1)[:, None]
    intent = shares.lookup(query, np.maximum(result_cat, 0))
    exact = results == intent_listing[:, None]
    attractiveness = base + w_match * match + w_intent * intent + w_exact * exact
    examination = 1.0 / (1.0 + np.arange(k)) ** config.examination_decay
    p = np.where(present, examination * attractiveness, 0.0)
    total = p.sum(axis=1, keepdims=True)
    p *= np.minimum(1.0, config.max_ctr / np.maximum(total, 1e-12))

    noise_cat = _noise_categories(result_cat, listing_category, n_categories, config.noise_categories, rng)
    noise_weight = np.where(noise_cat >= 0, 1.0 / (1.0 + np.arange(config.noise_categories)), 0.0)
    noise_weight /= np.maximum(noise_weight.sum(axis=1, keepdims=True), 1e-12)
    noise_total = p.sum(axis=1, keepdims=True) * config.click_noise / (1.0 - config.click_noise)
    p_all = np.concatenate([p, noise_total * noise_weight], axis=1)
    # Keep room for "no click" so the multinomial is valid; scaling keeps the noise share.
    p_all *= np.minimum(1.0, 0.95 / np.maximum(p_all.sum(axis=1, keepdims=True), 1e-12))
    return p_all, np.concatenate([result_cat, noise_cat], axis=1)


def _noise_categories(result_cat: np.ndarray, listing_category: np.ndarray, n_categories: int, n_noise: int,
                      rng: np.random.Generator) -> np.ndarray:
    """Per query, ``n_noise`` distinct categories (by sqrt of their listing count) absent
    from its results; -1 where too few could be drawn."""
    counts = np.bincount(listing_category, minlength=n_categories).astype(np.float64)
    p = np.sqrt(counts)
    draws = rng.choice(n_categories, size=(len(result_cat), 3 * n_noise), p=p / p.sum())
    bad = (draws[:, :, None] == result_cat[:, None, :]).any(axis=2)
    # Drop repeats of an earlier draw too.
    bad |= np.triu((draws[:, :, None] == draws[:, None, :]), k=1).any(axis=1)
    slot = np.cumsum(~bad, axis=1) - 1
    out = np.full((len(result_cat), n_noise), -1, dtype=np.int64)
    rows, cols = np.nonzero(~bad & (slot < n_noise))
    out[rows, slot[rows, cols]] = draws[rows, cols]
    return out


@dataclass(frozen=True)
class _Units:
    """What shoppers type: a raw text of a (clean or typo'd) query and its yearly searches."""

    raw: np.ndarray  # object
    query: np.ndarray  # int64: index into all queries (clean then typo'd)
    volume: np.ndarray  # float64


def _title_case(text: str) -> str:
    return " ".join(t[:1].upper() + t[1:] for t in text.split(" "))


def _raw_units(texts: list[str], volume: np.ndarray, config: SimulationConfig, rng: np.random.Generator) -> _Units:
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
    return _Units(unit_raw[order], unit_query[order], unit_volume[order])


@dataclass(frozen=True)
class _Rows:
    unit: np.ndarray
    category: np.ndarray
    date: np.ndarray
    impressions: np.ndarray
    clicks: np.ndarray
    unit_searches: np.ndarray  # yearly searches per unit


def _month_starts(start: str) -> list[date]:
    try:
        first = date.fromisoformat(start)
    except ValueError:
        raise InputError(f"simulation start_date {start!r} is not an ISO date (YYYY-MM-DD)") from None
    starts = []
    for m in range(13):
        year, month = first.year + (first.month - 1 + m) // 12, (first.month - 1 + m) % 12 + 1
        starts.append(date(year, month, min(first.day, calendar.monthrange(year, month)[1])))
    return starts


def _sample_clicks(units: _Units, source: np.ndarray, click_p: np.ndarray, outcome_cat: np.ndarray,
                   n_categories: int, config: SimulationConfig, rng: np.random.Generator) -> _Rows:
    """Searches per unit and month (Poisson around a seasonal profile), then clicks per
    outcome (multinomial: at most one click per search), summed per category."""
    starts = _month_starts(config.start_date)
    season = _SEASON[[s.month - 1 for s in starts[:12]]]
    profile = season * rng.gamma(4.0, 0.25, size=(len(units.volume), 12))
    profile /= profile.sum(axis=1, keepdims=True)
    searches = rng.poisson(units.volume[:, None] * profile)

    unit, month = np.nonzero(searches)
    n = searches[unit, month]
    query = source[units.query[unit]]
    p = click_p[query]
    pvals = np.concatenate([p, 1.0 - p.sum(axis=1, keepdims=True)], axis=1)
    clicks = rng.multinomial(n, pvals)[:, :-1]

    row, slot = np.nonzero(clicks)
    key = row.astype(np.int64) * n_categories + outcome_cat[query[row], slot]
    key, inverse = np.unique(key, return_inverse=True)
    row_clicks = np.bincount(inverse, weights=clicks[row, slot]).astype(np.int64)
    row, category = np.divmod(key, n_categories)

    # One day per unit-month, shared by its category rows.
    first = starts[0]
    offsets = np.array([(s - first).days for s in starts])
    day = offsets[month] + (rng.uniform(size=len(month)) * (offsets[month + 1] - offsets[month])).astype(np.int64)
    iso = np.asarray([(first + timedelta(days=d)).isoformat() for d in range(offsets[-1])], dtype=object)
    return _Rows(
        unit=unit[row],
        category=category,
        date=iso[day[row]],
        impressions=n[row].astype(np.int64),
        clicks=row_clicks,
        unit_searches=searches.sum(axis=1).astype(np.float64),
    )


# --------------------------------------------------------------------------- output


def _write_arrays(arrays: dict[str, np.ndarray], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    target = str(path).replace("'", "''")
    options = "format csv, header true" if path.suffix.lower() == ".csv" else "format parquet, compression zstd"
    con = duckdb.connect()
    try:
        con.register("arrays", arrays)
        con.execute(f"copy (select * from arrays) to '{target}' ({options})")
    finally:
        con.close()
