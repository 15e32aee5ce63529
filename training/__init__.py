"""qcat training: click logs in, training data, the demo simulator, catalogs, the trainers (NB,
XReg, XML-Q), model selection and calibration, and the ``qcat train`` / ``qcat data`` commands.

Training from Python (each function runs ``qcat train BACKEND`` with the same flags)::

    from qcat.training import train_nb
    classifier = train_nb("my-nb", log="clicks.csv", taxonomy="taxonomy.tsv")

Importing it needs only qcat's core; its subpackages need the ``data`` extra (XML-Q's, ``train``),
and their import error names it.
"""

from qcat.training.api import train, train_hybrid, train_nb, train_rerank, train_xmlq, train_xreg

__all__ = ["train", "train_hybrid", "train_nb", "train_rerank", "train_xmlq", "train_xreg"]
