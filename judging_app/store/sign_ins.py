"""Sign-ins that survive a page reload, without the token in the URL.

After a judge (or admin) signs in with their token, the app gives the browser a random key in a
session cookie (gone when the browser closes); the store keeps only the key's SHA-256, with who
it signs in. A reload, whose new Streamlit session starts empty, finds the judge again from the
cookie. Signing out deletes the key; resetting a judge's token or deactivating the judge deletes
all of theirs. A key expires on the server :data:`LIFETIME` after the sign-in (``qcat judge app
--sign-in-hours``): :func:`recall` then deletes it, and the judge signs in again with their token.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from datetime import datetime, timedelta, timezone

from sqlalchemy import delete, select

from qcat.judging.store.connection import Store
from qcat.judging.store.models import Admin, Judge, SignIn, utcnow

COOKIE = "qcat_sign_in"
LIFETIME = timedelta(hours=12)
LIFETIME_ENV = "QCAT_SIGN_IN_HOURS"


def lifetime_from_env() -> timedelta:
    """``$QCAT_SIGN_IN_HOURS`` (set by ``qcat judge app --sign-in-hours``), else :data:`LIFETIME`."""
    try:
        hours = float(os.environ.get(LIFETIME_ENV, ""))
    except ValueError:
        return LIFETIME
    return timedelta(hours=hours) if hours > 0 else LIFETIME


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def remember(store: Store, person: Judge | Admin) -> str:
    """A new key that signs ``person`` in (returned once: it goes into the browser's cookie)."""
    key = secrets.token_urlsafe(32)
    owner = {"admin_id": person.id} if isinstance(person, Admin) else {"judge_id": person.id}
    with store.transaction() as session:
        session.add(SignIn(key_hash=_digest(key), **owner))
    return key


def recall(store: Store, key: str | None, lifetime: timedelta = LIFETIME) -> Judge | Admin | None:
    """Who the key signs in: an active judge or an admin; None for no key, an unknown, deleted or
    expired key (older than ``lifetime``: deleted now), or a deactivated judge."""
    if not key:
        return None
    with store.transaction() as session:
        sign_in = session.scalar(select(SignIn).where(SignIn.key_hash == _digest(key)))
        if sign_in is None:
            return None
        now = utcnow()
        if _aware(sign_in.created_at) < now - lifetime:
            session.delete(sign_in)
            return None
        sign_in.seen_at = now
        person = session.get(Admin, sign_in.admin_id) if sign_in.admin_id else session.get(Judge, sign_in.judge_id)
    if isinstance(person, Judge) and not person.active:
        return None
    return person


def forget(store: Store, key: str | None) -> None:
    """Sign the browser holding ``key`` out."""
    if key:
        with store.transaction() as session:
            session.execute(delete(SignIn).where(SignIn.key_hash == _digest(key)))
