"""The Streamlit app: the judge's page with its grading panel (panel.py, panel.js, panel.css) and
the admin page."""
