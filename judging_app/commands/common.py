"""What the ``qcat db`` and ``qcat judge`` commands share: progress lines on stderr, a store's URL as
shown (no password), and the check that a session exists."""

from __future__ import annotations

import sys


def say(message: str) -> None:
    print(message, file=sys.stderr)


def display_url(url: str) -> str:
    from qcat.judging.store.connection import parse_url

    return parse_url(url).render_as_string(hide_password=True)


def existing_session(store, key: str) -> str:
    """The session's kind (results or categories); an error when there is no such session."""
    from qcat.judging.grading.sessions import find_session

    with store.sessions() as session:
        return find_session(session, key).kind
