"""The one script the judging page runs outside the grading panel: the sign-in cookie.

It runs in the page itself through ``st.html(..., unsafe_allow_javascript=True)`` (the supported
API; ``st.components.v1.html`` is deprecated). The keyboard, the focus and the grades kept across
a reload are the grading panel's (:mod:`qcat.judging.pages.panel`).
"""

from __future__ import annotations

import json

import streamlit as st

from qcat.judging.store.sign_ins import COOKIE


def set_sign_in_cookie(key: str | None) -> None:
    """Give the browser the sign-in key in a session cookie (gone when the browser closes); None
    deletes it. Only the page's own origin can read it; it never appears in a URL."""
    value = f"{COOKIE}={key}; path=/; SameSite=Strict" if key else f"{COOKIE}=; path=/; SameSite=Strict; max-age=0"
    st.html(f"<script>document.cookie = {json.dumps(value)};</script>", unsafe_allow_javascript=True)
