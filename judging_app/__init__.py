"""qcat judging: the Streamlit side-by-side judging app and its SQL store; store/, grading/,
reporting/ and pages/ say what each holds; cli.py is ``qcat db`` and ``qcat judge``."""

from qcat.console.extras import require_extra

require_extra("judge", "qcat.judging")
