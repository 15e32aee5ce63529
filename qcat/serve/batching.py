"""The model call behind ``/v1/classify``: two runners with one interface.

``DirectRunner`` classifies each request on its own, on the event loop. ``MicroBatcher`` queues
requests and classifies all that are waiting (same model) in one call, up to ``max_queries``:
concurrent small requests share the model's fixed per-call cost, with no added wait, since a
batch is whatever arrived while the previous call ran. Requests for different k share the call
at their largest k, each cut to its own (``Classifier.k_group`` says which k may share), and
each request's ``min_score`` is applied to its own answers.
A lone query takes the model's compiled single-query path, and so does each query of a batch where
the model is faster one by one (see ``Classifier.classify``). Both run the model on the
event loop thread (it holds the GIL anyway), so a call is never shared between threads.
A request that has waited past its deadline is answered 503 and not computed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace

from qcat.classifier import Classification, Failure, check_min_score
from qcat.serve.loading import LoadedModel
from qcat.serve.metrics import ServiceMetrics

Answer = Classification | Failure


class DeadlineExceeded(Exception):
    pass


def _run(loaded: LoadedModel, queries: list[str], k: int, max_length: int, metrics: ServiceMetrics,
         precision: float | None = None) -> list[Answer]:
    answers = loaded.classifier.classify_each(queries, k, max_length, precision=precision)
    metrics.model_calls.observe(len(queries))
    return answers


def cut(answers: list[Answer], k: int, min_score: float | None) -> list[Answer]:
    """Answers computed at a larger k (or at this one), cut to the top ``k`` categories and to
    those scoring at least ``min_score``."""
    floor = check_min_score(min_score)  # the classifier's rule: one call serves requests of several floors
    return [_cut(a, k, floor) if isinstance(a, Classification) else a for a in answers]


def _cut(answer: Classification, k: int, floor: float) -> Classification:
    kept = tuple(c for c in answer.categories[:k] if c.score >= floor)
    return answer if len(kept) == len(answer.categories) else replace(answer, categories=kept)


class DirectRunner:
    def __init__(self, metrics: ServiceMetrics, max_length: int) -> None:
        self.metrics = metrics
        self.max_length = max_length

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def classify(self, loaded: LoadedModel, queries: list[str], k: int, min_score: float | None,
                       deadline: float, precision: float | None = None) -> list[Answer]:
        if asyncio.get_running_loop().time() > deadline:
            raise DeadlineExceeded()
        return cut(_run(loaded, queries, k, self.max_length, self.metrics, precision), k, min_score)


@dataclass
class _Job:
    loaded: LoadedModel
    queries: list[str]
    k: int
    min_score: float | None
    deadline: float
    future: asyncio.Future = field(repr=False)
    precision: float | None = None


class MicroBatcher:
    def __init__(self, metrics: ServiceMetrics, max_length: int, max_queries: int) -> None:
        self.metrics = metrics
        self.max_length = max_length
        self.max_queries = max_queries
        self._jobs: list[_Job] = []
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        self._wakeup = asyncio.Event()
        self._task = asyncio.create_task(self._serve(), name="qcat-micro-batcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for job in self._jobs:
            if not job.future.done():
                job.future.set_exception(DeadlineExceeded())
        self._jobs.clear()

    async def classify(self, loaded: LoadedModel, queries: list[str], k: int, min_score: float | None,
                       deadline: float, precision: float | None = None) -> list[Answer]:
        loop = asyncio.get_running_loop()
        job = _Job(loaded, queries, k, min_score, deadline, loop.create_future(), precision)
        self._jobs.append(job)
        self._wakeup.set()
        try:
            return await asyncio.wait_for(job.future, max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            raise DeadlineExceeded() from None

    def _take_batch(self) -> list[_Job]:
        """The oldest job and the waiting jobs with its model, k group and precision, up to ``max_queries``."""
        first = self._jobs[0]
        group = first.loaded.classifier.k_group(first.k)
        batch, size, rest = [], 0, []
        for job in self._jobs:
            fits = (job.loaded is first.loaded and job.loaded.classifier.k_group(job.k) == group
                    and job.precision == first.precision and (not batch or size + len(job.queries) <= self.max_queries))
            if fits:
                batch.append(job)
                size += len(job.queries)
            else:
                rest.append(job)
        self._jobs = rest
        return batch

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._jobs:
                now = loop.time()
                batch = [job for job in self._take_batch() if not job.future.done()]
                for job in batch:
                    if now > job.deadline:
                        job.future.set_exception(DeadlineExceeded())
                batch = [job for job in batch if not job.future.done()]
                if batch:
                    queries = [query for job in batch for query in job.queries]
                    k = max(job.k for job in batch)
                    try:
                        answers = _run(batch[0].loaded, queries, k, self.max_length, self.metrics, batch[0].precision)
                    except Exception as exc:  # a model failure fails its batch's requests, not the service
                        for job in batch:
                            job.future.set_exception(exc)
                    else:
                        start = 0
                        for job in batch:
                            job.future.set_result(cut(answers[start:start + len(job.queries)], job.k, job.min_score))
                            start += len(job.queries)
                # Let the loop read the requests that arrived during the call before the next one.
                await asyncio.sleep(0)
