"""The scale-out mode: ingest jobs on a Redis queue (SAQ), run by ``tracelens worker``.

Without ``TRACELENS_QUEUE_URL`` none of this is imported: the web process ingests in its
own thread pool (:mod:`web.ingest_worker`). With it, the web process only enqueues
(:mod:`web.queue.dispatcher`), and workers on any machine that shares the data directory
and the catalog run the jobs (:mod:`web.queue.worker`, :mod:`web.queue.jobs`).

- ``payload``: what a job carries (its kind, run, rank) and its key on the queue.
- ``connection``: the SAQ queue for the settings, and the options every job gets.
- ``recovery``: catalog runs checked against their jobs; lost ones enqueued again.
- ``bridge``: the queue's event loop for the synchronous web code.
- ``fanout``: a run of several ranks as rank jobs and one align job.
"""
