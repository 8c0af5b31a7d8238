"""API tokens kept in the catalog (hashed), alongside any given in TRACELENS_API_TOKENS."""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from web.catalog.models import ApiToken, utcnow


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(s: Session, name: str) -> str:
    """A new random token stored under ``name``; the clear text is returned once.

    A revoked token's name may be used again: the new token replaces it.
    """
    token = "tl_" + secrets.token_urlsafe(32)
    old = s.scalar(select(ApiToken).where(ApiToken.name == name))
    if old is not None and old.revoked_at is not None:
        old.token_sha256 = token_digest(token)
        old.revoked_at = None
        old.created_at = utcnow()
        return token
    s.add(ApiToken(name=name, token_sha256=token_digest(token)))
    return token


def has_tokens(s: Session) -> bool:
    """Whether tokens were ever created: then writes need one, even when all are revoked."""
    return bool(s.scalar(select(func.count()).select_from(ApiToken)))


def token_known(s: Session, token: str) -> bool:
    return (
        s.scalar(
            select(ApiToken.id).where(
                ApiToken.token_sha256 == token_digest(token), ApiToken.revoked_at.is_(None)
            )
        )
        is not None
    )


def list_tokens(s: Session) -> list[tuple[str, str, str | None]]:
    """(name, created, revoked) of every stored token; the tokens are not recoverable."""
    return [
        (
            t.name,
            t.created_at.isoformat(timespec="seconds"),
            t.revoked_at.isoformat(timespec="seconds") if t.revoked_at else None,
        )
        for t in s.scalars(select(ApiToken).order_by(ApiToken.name))
    ]


def revoke_token(s: Session, name: str) -> bool:
    token = s.scalar(select(ApiToken).where(ApiToken.name == name, ApiToken.revoked_at.is_(None)))
    if token is None:
        return False
    token.revoked_at = utcnow()
    return True
