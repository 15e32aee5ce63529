"""``qcat serve``: the classifier as an HTTP JSON service (Starlette on uvicorn).

Modules, each with one job: ``config`` (validated limits and options), ``loading`` (a verified
bundle and its identity; reload next to the running one), ``requests`` (parsing and checking
request input), ``batching`` (the model call: direct, or concurrent requests micro-batched into
one), ``metrics`` (Prometheus), ``app`` (routes, errors, access log), ``openapi`` (the API's
description), ``runner`` (listening socket, one process or pre-forked workers, signals).
Like ``qcat classify`` it imports no training code and no TensorFlow.
"""
