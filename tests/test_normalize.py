import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qcat.text.normalize import IN_WORD, normalize, tokenize


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("Dior  Gaudron", "dior gaudron"),
        ("AT&T iPhone® 4", "at&t iphone 4"),
        ("Rock & Roll!!", "rock roll"),
        ("9-10yrs 1.5' cable", "9 10yrs 1.5 cable"),
        ("King's  poster-bed.", "kings poster bed"),
        ("ＦＵＬＬ　ＷＩＤＴＨ", "full width"),  # NFKC folds full-width forms
        ("Rocketfish™ - USB", "rocketfish usb"),  # trade marks are dropped, not NFKC's 'TM'
        ("Apple®iPhone® 4 ©2011", "apple iphone 4 2011"),
        ("--", ""),
        ("a--b", "a b"),
        ("under_score", "under score"),
        ("Crème BRÛLÉE", "creme brulee"),
        ("हिन्दी किताब", "हिन्दी किताब"),  # combining marks stay inside their word
    ],
)
def test_examples(raw, expected):
    assert normalize(raw) == expected


def test_tokens_are_the_split_of_normalize():
    assert tokenize("Hornby Train-Set, OO gauge") == ["hornby", "train", "set", "oo", "gauge"]


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_idempotent(text):
    once = normalize(text)
    assert normalize(once) == once


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_tokens_are_clean(text):
    for token in tokenize(text):
        assert token and token == token.strip() and not any(ch.isspace() for ch in token)
        assert token[0] not in IN_WORD and token[-1] not in IN_WORD
        assert normalize(token) == token
        assert not any(ch in string.punctuation and ch not in IN_WORD for ch in token)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=string.ascii_letters + string.digits, min_size=1), min_size=1, max_size=6))
def test_plain_words_survive(words):
    assert tokenize("  ".join(words)) == [w.lower() for w in words]


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_case_and_surrounding_space_do_not_matter(text):
    assert normalize(f"  {text.upper()}\t") == normalize(normalize(text.upper()))


# Issue 53, item 18: what a person reads as one query is one query, folded as search engines fold text.
@pytest.mark.parametrize(
    "variants",
    [
        ("café", "Cafe", "CAFÉ", "cafe\u0301"),  # accents, composed or not
        ("Yoga-Mat", "yoga mat", "yoga\u2013mat"),  # hyphens and dashes split words
        ("usb-c", "usb c", "USB-C"),
        ("Men's", "mens", "Men\u2019s", "MENS"),  # possessives: the apostrophe goes, the s stays
        ("Barnes &amp; Noble", "barnes & noble", "BARNES &AMP; NOBLE", "Barnes &#38; Noble"),  # entities
        ("at&amp;t", "at&t", "AT&#38;T", "at&#x26;t"),
        ("Weiß", "weiss"),  # letters Unicode does not decompose
        ("Ørsted", "orsted"),
        ("Æon Flux", "aeon flux"),
    ],
)
def test_variants_fold_to_one_query(variants):
    assert len({normalize(v) for v in variants}) == 1, {v: normalize(v) for v in variants}


def test_folding_keeps_what_is_not_an_accent():
    assert normalize("हिन्दी") == "हिन्दी"  # marks of other scripts are part of the letter
    assert normalize("at&t 1.5mm") == "at&t 1.5mm"  # in-word & and . stay
    assert normalize("b&lt") == "b&lt"  # only the &...; form is an entity
    assert normalize("rock 'n' roll") == "rock n roll"
    assert normalize("ﬁne") == "fine"  # NFKC still folds compatibility forms


@given(st.text(alphabet=string.printable, max_size=40))
def test_the_ascii_path_is_the_general_path(text):
    """ASCII text without ``&`` takes a shorter path (qcat/text/normalize.py): the same tokens."""
    from qcat.text.normalize import _any_tokens, _ascii_tokens

    if "&" not in text:
        assert _ascii_tokens(text.lower()) == _any_tokens(text)


@pytest.mark.slow  # 152,438 distinct queries, each normalized twice
def test_the_ascii_path_is_the_general_path_on_every_demo_query():
    import duckdb

    from qcat.bundles.demo import demo_corpus_dir
    from qcat.text.normalize import _any_tokens, _ascii_tokens

    log = demo_corpus_dir() / "clicklog.parquet"
    queries = [q for q, in duckdb.sql(f"select distinct query from read_parquet('{log}')").fetchall()]
    plain = [q for q in queries if q.isascii() and "&" not in q]
    assert len(plain) > 100_000
    assert [q for q in plain if _ascii_tokens(q.lower()) != _any_tokens(q)] == []
