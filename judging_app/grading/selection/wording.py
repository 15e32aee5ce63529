"""What kind of sample a category session is, in the words of its report: only a random sample measures a model's precision; an ``uncertain`` or ``disagree`` one was
chosen where the models are weak or differ, so its figures run apart from the model's precision."""

from __future__ import annotations

NOT_PRECISION = {
    "uncertain": "its precision is not the model's precision: these queries were chosen because the model was least "
                 "sure of them, so its figures run lower than on traffic at large. Only a random sample "
                 "(create-session --select random) measures precision; use these grades as training data",
    "disagree": "its precision is not either model's precision, and its win/tie/loss counts only queries where the "
                "models disagree: these queries were chosen because their top categories differ. Only a random sample "
                "(create-session --select random) measures precision; use these grades as training data",
}


# What makes a query of the pool a candidate of a chosen sample, as a predicate ("22 of the pool of 400 ...").
CANDIDATES = {
    "uncertain": "with an answer from the first model",
    "disagree": "with the two models disagreeing",
}


def _queries(n: int) -> str:
    return f"{n:,} quer{'y' if n == 1 else 'ies'}"


def how_many(settings: dict, kind: str) -> str:
    """What a chosen (uncertain or disagree) session holds: ``the 24 queries of a pool of 400
    queries`` when it took its whole budget; else how many it took, the budget and why fewer
    (issue 53 item 12): ``22 queries (budget 24; only 22 of the pool of 400 with the two models
    disagreeing)``, or which segments held fewer than their share."""
    record = settings.get("selection") or {}
    pool = record.get("pool")
    budget = record.get("budget") or 0
    sampled = settings.get("sampled") or {}
    taken = sum(sampled.values()) if sampled else budget
    if taken >= budget:
        return f"the {taken:,} queries" + (f" of a pool of {pool:,} queries" if pool is not None else "")
    candidates, requested = record.get("candidates"), settings.get("requested") or {}
    of_pool = f" of the pool of {pool:,}" if pool is not None else ""
    if not candidates:  # a session made before the candidates were recorded
        return f"{_queries(taken)} (budget {budget:,}){of_pool}"
    total = sum(candidates.values())
    if total < budget:
        return f"{_queries(taken)} (budget {budget:,}; only {total:,}{of_pool} {CANDIDATES[kind]})"
    short = [f"{candidates.get(name, 0):,} in the {name} (its share {requested[name]:,})" for name in requested
             if sampled.get(name, 0) < requested[name]]
    but = f", but only {', '.join(short)}" if short else ""
    return f"{_queries(taken)} (budget {budget:,}; {total:,}{of_pool} {CANDIDATES[kind]}{but})"


def say_short_segment(name: str, held: int, trained: int, never: int, candidates: tuple[str, int] | None,
                      no_answer: int, taken: int, wanted: int) -> str:
    """The warning for a segment that gave fewer queries than its share, counting what the segment
    holds (issue 53 item 12: it counted a selection's candidates as the segment's queries): ``the tail
    segment holds 376 queries, 22 of them with the two models disagreeing: 22 taken, fewer than the 24
    asked for``. ``trained``, ``never``: left out as a model's training queries, as judged before;
    ``candidates``: ``(kind, count)`` for a chosen sample, None otherwise."""
    parts = [f"warning: the {name} segment holds {_queries(held)}"]
    if trained:
        parts.append(f"{trained:,} of them left out (a model trained on them)")
    if never:
        parts.append(f"{never:,} left out (never asked again)")
    if candidates is not None:
        kind, count = candidates
        parts.append(f"{count:,} of {'the rest' if trained or never else 'them'} {CANDIDATES[kind]}")
    if no_answer:
        parts.append(f"{no_answer:,} of them without any category from the models")
    return ", ".join(parts) + f": {taken:,} taken, fewer than the {wanted:,} asked for"


def sample_kind(settings: dict) -> str:
    """``random``, ``uncertain`` or ``disagree`` (``random`` for a session made before ``--select``)."""
    return str((settings.get("selection") or {}).get("kind", "random"))


def sample_line(settings: dict, n_models: int) -> str:
    """One sentence for the report's header: which kind of sample the session is, how it was made,
    and, for a chosen (not random) sample, that its precision is not the model's."""
    record = settings.get("selection") or {}
    kind = sample_kind(settings)
    left = record.get("left_out") or {}
    left_text = ("; left out: " + ", ".join(f"{n:,} {reason}" for reason, n in left.items())
                 if left else "")
    pool = f" of a pool of {record['pool']:,} queries" if record.get("pool") is not None else ""
    whose = "the model's" if n_models == 1 else "the models'"
    if kind == "uncertain":
        scores = "calibrated" if record.get("scores") != "raw" else "raw (the model has no calibration)"
        return (f"Sample: uncertain, {how_many(settings, kind)} on which {record.get('model')}'s "
                f"top two {scores} scores were closest (split evenly over the segments, seed {record.get('seed', 0)}{left_text}): "
                + NOT_PRECISION["uncertain"] + ".")
    if kind == "disagree":
        return (f"Sample: disagree, {how_many(settings, kind)} with the most impressions on which "
                f"the two models' top-1 categories differ (split evenly over the segments, seed {record.get('seed', 0)}"
                f"{left_text}): " + NOT_PRECISION["disagree"] + ".")
    if settings.get("traffic") and (record.get("budget") is None if record else
                                    settings.get("requested") == settings.get("available")):
        return f"Sample: every query of the traffic file{left_text}: its figures are {whose} precision on that traffic."
    if not record:
        return ("Sample: random, a third per segment (a session made before --select): its figures estimate "
                f"{whose} precision on this traffic.")
    split = "split evenly over the segments" if record.get("given") else "a third per segment"
    return (f"Sample: random, {split} (seed {record.get('seed', 0)}{pool}{left_text}): its figures estimate "
            f"{whose} precision on this traffic.")



def say_selection(record: dict, taken: int) -> str:
    """What ``create-session --select uncertain|disagree`` took, for its output."""
    candidates = sum((record.get("candidates") or {}).values())
    what = (f"the smallest margins between {record.get('model')}'s top two {record.get('scores', 'calibrated')} scores"
            if record["kind"] == "uncertain" else "the two models' top-1 categories differ, most impressions first")
    return (f"--select {record['kind']}: {taken:,} of {candidates:,} candidates taken ({what}): training data; its "
            "precision is not the model's (a random sample measures that)")
