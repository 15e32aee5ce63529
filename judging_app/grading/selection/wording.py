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
        return (f"Sample: uncertain, the {record.get('budget', 0):,} queries{pool} on which {record.get('model')}'s "
                f"top two {scores} scores were closest (split evenly over the segments, seed {record.get('seed', 0)}{left_text}): "
                + NOT_PRECISION["uncertain"] + ".")
    if kind == "disagree":
        return (f"Sample: disagree, the {record.get('budget', 0):,} queries{pool} with the most impressions on which "
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
