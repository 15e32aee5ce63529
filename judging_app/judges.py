"""Judges: adding one (its token is returned once) and signing in with a token."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from judging_app import tokens
from judging_app.models import Judge
from judging_app.store import Store
from qcat.errors import InputError

MAX_NAME = 200
EMPTY_TOKEN = "enter your judge token: paste the token you were given into the field, then sign in"


def check_name(name: str, what: str = "judge name") -> str:
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"the {what} is empty")
    name = name.strip()
    if len(name) > MAX_NAME:
        raise InputError(f"the {what} is longer than {MAX_NAME} characters")
    if any(ord(c) < 32 for c in name):
        raise InputError(f"the {what} {name!r} contains control characters")
    return name


def add_judge(store: Store, name: str) -> tuple[Judge, str]:
    """Store a new judge; returns it and the token (the only time the token exists)."""
    name = check_name(name)
    token = tokens.new_token()
    judge = Judge(name=name, token_id=token.token_id, token_salt=token.salt, token_hash=token.digest)
    try:
        with store.transaction() as session:
            if session.scalar(select(Judge.id).where(Judge.name == name)) is not None:
                raise InputError(f"a judge named {name!r} already exists")
            session.add(judge)
    except IntegrityError:
        raise InputError(f"a judge named {name!r} already exists") from None
    return judge, token.token


def find_judge(session, name: str) -> Judge:
    """A judge by name; :class:`InputError` when none has it."""
    judge = session.scalar(select(Judge).where(Judge.name == name.strip()))
    if judge is None:
        raise InputError(f"no judge named {name!r} (`qcat judge add-judge NAME` adds one)")
    return judge


def authenticate(store: Store, token: str) -> Judge:
    """The judge whose token this is; :class:`InputError` for an empty (the store is not asked),
    unknown or malformed token."""
    if not isinstance(token, str) or not token.strip():
        raise InputError(EMPTY_TOKEN)
    parts = tokens.split_token(token)
    unknown = InputError("unknown token: check that you pasted the whole token you were given")
    if parts is None:
        raise unknown
    token_id, secret = parts
    with store.sessions() as session:
        judge = session.scalar(select(Judge).where(Judge.token_id == token_id))
    if judge is None:
        tokens.hash_secret(secret, "00" * 16)  # same work either way: no timing hint that the id exists
        raise unknown
    if not tokens.verify(secret, judge.token_salt, judge.token_hash):
        raise unknown
    return judge
