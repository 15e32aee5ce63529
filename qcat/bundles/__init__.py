"""A model on disk: verified, pickle-free bundles and their manifest (``bundle.py``) and finding the
demo model, ``qcat-demo`` (``demo.py``)."""
