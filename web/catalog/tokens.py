"""API tokens kept in the catalog (hashed), alongside any given in TRACELENS_API_TOKENS."""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from web.catalog.models import ApiToken


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(s: Session, name: str) -> str:
    """A new random token stored under ``name``; the clear text is returned once."""
    token = "tl_" + secrets.token_urlsafe(32)
    s.add(ApiToken(name=name, token_sha256=token_digest(token)))
    return token


def has_tokens(s: Session) -> bool:
    return bool(s.scalar(select(func.count()).select_from(ApiToken)))


def token_known(s: Session, token: str) -> bool:
    return (
        s.scalar(select(ApiToken.id).where(ApiToken.token_sha256 == token_digest(token)))
        is not None
    )


def list_tokens(s: Session) -> list[tuple[str, str]]:
    """(name, created) of every stored token; the tokens themselves are not recoverable."""
    return [
        (t.name, t.created_at.isoformat(timespec="seconds"))
        for t in s.scalars(select(ApiToken).order_by(ApiToken.name))
    ]


def revoke_token(s: Session, name: str) -> bool:
    token = s.scalar(select(ApiToken).where(ApiToken.name == name))
    if token is None:
        return False
    s.delete(token)
    return True
