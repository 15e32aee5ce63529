"""``qcat judge add-judge|add-admin|reset-token|deactivate|members``: judges, admins and who may judge
a session."""

from __future__ import annotations

import argparse

from qcat.judging.commands.common import say


def run_add_judge(args: argparse.Namespace) -> int:
    from qcat.judging.grading.judges import add_judge
    from qcat.judging.store.connection import open_store

    store = open_store(args.url)
    judge, token = add_judge(store, args.name)
    store.dispose()
    say(f"judge {judge.id} {judge.name!r} added. Their sign-in token (shown only this once; only a hash is stored):")
    print(token)
    return 0


def run_add_admin(args: argparse.Namespace) -> int:
    from qcat.judging.grading.judges import add_admin
    from qcat.judging.store.connection import open_store

    store = open_store(args.url)
    admin, token = add_admin(store, args.name)
    store.dispose()
    say(f"admin {admin.id} {admin.name!r} added. Their admin token (shown only this once; only a hash is stored); "
        f"it signs in to the app's admin page:")
    print(token)
    return 0


def _judge_id(store, name: str) -> int:
    from qcat.judging.grading.judges import find_judge

    with store.sessions() as session:
        return find_judge(session, name).id


def run_reset_token(args: argparse.Namespace) -> int:
    from qcat.judging.grading.judges import reset_token
    from qcat.judging.store.connection import open_store

    store = open_store(args.url)
    token = reset_token(store, _judge_id(store, args.name))
    store.dispose()
    say(f"judge {args.name!r} has a new token (shown only this once); the old one no longer works and their "
        f"browsers are signed out:")
    print(token)
    return 0


def run_deactivate(args: argparse.Namespace) -> int:
    from qcat.judging.grading.judges import set_active
    from qcat.judging.store.connection import open_store

    store = open_store(args.url)
    released = set_active(store, _judge_id(store, args.name), args.reactivate)
    store.dispose()
    say(f"judge {args.name!r} can sign in again" if args.reactivate else
        f"judge {args.name!r} deactivated: signed out, {len(released)} open claim{'s' * (len(released) != 1)} "
        f"released; their judgments stay")
    return 0


def run_members(args: argparse.Namespace) -> int:
    from qcat.judging.grading.sessions import change_members
    from qcat.judging.store.connection import open_store

    store = open_store(args.url)
    name, judges = change_members(store, args.session, args.add, args.remove)
    store.dispose()
    for judge in judges:
        print(judge)
    say(f"session {name!r}: " + (f"{len(judges)} judge{'s' * (len(judges) != 1)} may judge it" if judges else
                                 "names no judge: every active judge may judge it"))
    return 0
