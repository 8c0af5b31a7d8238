"""Route decorators for handlers that block: catalog queries, DuckDB, files.

Litestar runs a synchronous handler in a worker thread only when the handler says so
(``sync_to_thread=True``, an option neither Controller nor Router carries); every
synchronous handler of this service blocks, so they are all declared with these.
"""

from __future__ import annotations

from functools import partial

from litestar import delete, get, patch, post, put

blocking_get = partial(get, sync_to_thread=True)
blocking_post = partial(post, sync_to_thread=True)
blocking_delete = partial(delete, sync_to_thread=True)
blocking_put = partial(put, sync_to_thread=True)
blocking_patch = partial(patch, sync_to_thread=True)
