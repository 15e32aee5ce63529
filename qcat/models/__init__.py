"""Every backend's inference behind one protocol (``model.py``: ``predict``, ``explain``, ``save``,
``from_manifest``): NB (``nb.py``), XReg and its label tree (``xreg.py``, ``label_tree.py``,
``sparse_rows.py``), XML-Q on onnxruntime (``xmlq.py``, ``query_encoding.py``), the hybrid
(``hybrid.py``); the calibration maps (``calibration.py``), judged overrides served first
(``overrides.py``), the compiled single-query path (``kernels.py``, numba) and the backend registry
that loads any bundle's model (``backends.py``)."""
