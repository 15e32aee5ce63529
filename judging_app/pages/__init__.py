"""The Streamlit app: the judge's page with its grading panel (panel.py, panel.css and
the panel*.js modules) and the admin page."""

from importlib.resources import files


def standard_guidelines(kind: str) -> str:
    """The guidelines qcat ships for a session kind (``guidelines_results.md``,
    ``guidelines_categories.md`` in this package; ``qcat judge guidelines`` prints them). A
    session's own (``create-session --guidelines``) are shown above them."""
    return (files(__name__) / f"guidelines_{kind}.md").read_text(encoding="utf-8")
