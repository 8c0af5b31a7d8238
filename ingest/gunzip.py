"""Bounded gzip inflation: the guard against gzip bombs, for trace files and uploads alike.

A few kilobytes of gzip can inflate to gigabytes, so input is inflated in steps of bounded
output and the total is counted against a cap as it grows: a bomb fails after one step,
not after filling memory or disk. Concatenated members are read one after another, zero
padding after the last member (some writers leave it) is skipped, and input that ends
inside a member is refused as truncated.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 31  # zlib's gzip container, header and trailer checked


class GzipProblem(ValueError):
    """Gzip input that cannot be inflated; ``problem`` says why, without naming the file."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


class GzipTooLarge(GzipProblem):
    """The input inflates to more than the cap."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"decompresses to more than {limit:,} bytes")


class BoundedGunzip:
    """Inflates gzip input pushed to it piece by piece, never more than ``limit`` bytes."""

    def __init__(self, limit: int, step: int) -> None:
        self.limit = limit
        # the most one inflate call may produce: what a bomb gets before the cap is checked
        self.step = step
        self.total = 0
        self._decomp = zlib.decompressobj(wbits=_GZIP_WBITS)
        self._in_member = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The inflated bytes of ``data``, in pieces of at most ``step`` bytes."""
        while data:
            if not self._in_member and not data.strip(b"\x00"):
                return  # zero padding after the last member
            self._in_member = True
            try:
                out = self._decomp.decompress(data, self.step)
            except zlib.error as exc:
                raise GzipProblem(f"damaged gzip data ({exc})") from None
            self.total += len(out)
            if self.total > self.limit:
                raise GzipTooLarge(self.limit)
            if out:
                yield out
            if self._decomp.eof:
                data = self._decomp.unused_data
                self._decomp = zlib.decompressobj(wbits=_GZIP_WBITS)
                self._in_member = False
            else:
                data = self._decomp.unconsumed_tail

    def finish(self) -> None:
        """Call after the last input: refuses input that stopped inside a member."""
        if self._in_member:
            raise GzipProblem("truncated gzip file (the compressed stream ends early)")
