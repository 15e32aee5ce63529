"""Streamlit side-by-side judging app and its SQL store (see the judging-app issue)."""
