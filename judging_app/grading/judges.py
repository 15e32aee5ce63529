"""Judges and admins: adding one (its token is returned once), signing in with a token,
resetting a judge's token and deactivating a judge (the admin page and the CLI do both).

Judge tokens and admin tokens live in separate tables: a judge's token never opens the admin
page, and an admin's token does not grade.
"""

from __future__ import annotations

from typing import TypeVar

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from qcat.errors import InputError
from qcat.judging.grading.assignment import INACTIVE, release
from qcat.judging.store import tokens
from qcat.judging.store.connection import Store
from qcat.judging.store.models import Admin, Judge, SignIn

MAX_NAME = 200
EMPTY_TOKEN = "enter your judge token: paste the token you were given into the field, then sign in"
UNKNOWN_TOKEN = "unknown token: check that you pasted the whole token you were given"
Person = TypeVar("Person", Judge, Admin)


def check_name(name: str, what: str = "judge name") -> str:
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"the {what} is empty")
    name = name.strip()
    if len(name) > MAX_NAME:
        raise InputError(f"the {what} is longer than {MAX_NAME} characters")
    if any(ord(c) < 32 for c in name):
        raise InputError(f"the {what} {name!r} contains control characters")
    return name


def _add(store: Store, model: type[Person], name: str, what: str) -> tuple[Person, str]:
    name = check_name(name, f"{what} name")
    token = tokens.new_token()
    person = model(name=name, token_id=token.token_id, token_salt=token.salt, token_hash=token.digest)
    taken = InputError(f"a{'n' if what[0] in 'aeiou' else ''} {what} named {name!r} already exists")
    try:
        with store.transaction() as session:
            if session.scalar(select(model.id).where(model.name == name)) is not None:
                raise taken
            session.add(person)
    except IntegrityError:
        raise taken from None
    return person, token.token


def add_judge(store: Store, name: str) -> tuple[Judge, str]:
    """Store a new judge; returns it and the token (the only time the token exists)."""
    return _add(store, Judge, name, "judge")


def add_admin(store: Store, name: str) -> tuple[Admin, str]:
    """Store a new admin (an organizer who opens the app's admin page); returns it and the token."""
    return _add(store, Admin, name, "admin")


def find_judge(session, name: str) -> Judge:
    """A judge by name; :class:`InputError` when none has it."""
    judge = session.scalar(select(Judge).where(Judge.name == name.strip()))
    if judge is None:
        raise InputError(f"no judge named {name!r} (`qcat judge add-judge NAME` adds one)")
    return judge


def _authenticate(store: Store, model: type[Person], token: str) -> Person | None:
    """The row of ``model`` whose token this is, or None (same work either way: no timing hint)."""
    parts = tokens.split_token(token)
    if parts is None:
        return None
    token_id, secret = parts
    with store.sessions() as session:
        person = session.scalar(select(model).where(model.token_id == token_id))
    if person is None:
        tokens.hash_secret(secret, "00" * 16)
        return None
    return person if tokens.verify(secret, person.token_salt, person.token_hash) else None


def authenticate(store: Store, token: str) -> Judge:
    """The active judge whose token this is; :class:`InputError` for an empty (the store is not
    asked), unknown or malformed token, or a deactivated judge."""
    if not isinstance(token, str) or not token.strip():
        raise InputError(EMPTY_TOKEN)
    judge = _authenticate(store, Judge, token)
    if judge is None:
        raise InputError(UNKNOWN_TOKEN)
    if not judge.active:
        raise InputError(INACTIVE)
    return judge


def authenticate_any(store: Store, token: str) -> Judge | Admin:
    """A judge's or an admin's token (the app's one sign-in field takes either)."""
    if not isinstance(token, str) or not token.strip():
        raise InputError(EMPTY_TOKEN)
    if tokens.split_token(token) is not None:
        admin = _authenticate(store, Admin, token)
        if admin is not None:
            return admin
    return authenticate(store, token)


def reset_token(store: Store, judge_id: int) -> str:
    """Give the judge a new token (returned, the only time it exists); the old one stops working
    and the judge's browsers are signed out."""
    token = tokens.new_token()
    with store.transaction() as session:
        judge = _judge(session, judge_id)
        judge.token_id, judge.token_salt, judge.token_hash = token.token_id, token.salt, token.digest
        session.execute(delete(SignIn).where(SignIn.judge_id == judge_id))
    return token.token


def set_active(store: Store, judge_id: int, active: bool) -> list:
    """Deactivate (sign out everywhere, release open claims; the judgments stay) or reactivate a
    judge. Returns the claims released."""
    with store.transaction() as session:
        _judge(session, judge_id).active = active
        if not active:
            session.execute(delete(SignIn).where(SignIn.judge_id == judge_id))
    return [] if active else release(store, judge_id=judge_id)


def _judge(session, judge_id: int) -> Judge:
    judge = session.get(Judge, judge_id)
    if judge is None:
        raise InputError(f"judge {judge_id!r} does not exist")
    return judge
