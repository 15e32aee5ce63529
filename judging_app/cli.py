"""``qcat db`` (migrations) and ``qcat judge`` (sessions, judges, the app, results): the entry the
command line delegates to; each action is in :mod:`qcat.judging.commands`."""

from __future__ import annotations

import argparse

from qcat.judging.commands.app import run_app
from qcat.judging.commands.parsers import db_parser, judge_parser
from qcat.judging.commands.people import run_add_admin, run_add_judge, run_deactivate, run_members, run_reset_token
from qcat.judging.commands.sessions import (
    run_add_gold,
    run_create,
    run_export,
    run_guidelines,
    run_release,
    run_report,
    run_sessions,
)
from qcat.judging.commands.store import run_backup, run_db


def build_parser(command: str) -> argparse.ArgumentParser:
    """The parser of ``qcat db`` or ``qcat judge`` (the CLI reference is generated from it)."""
    return db_parser() if command == "db" else judge_parser()


def main(command: str, argv: list[str]) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from qcat.judging.store.connection import database_error

    args = build_parser(command).parse_args(argv)
    run = run_db if command == "db" else JUDGE_ACTIONS[args.action]
    try:
        return run(args)
    except SQLAlchemyError as exc:  # one line naming the store: no SQL, no parameters, no traceback
        raise database_error(getattr(args, "url", None), exc) from None


JUDGE_ACTIONS = {"create-session": run_create, "add-judge": run_add_judge, "sessions": run_sessions, "app": run_app,
                 "report": run_report, "export": run_export, "release": run_release,
                 "backup": run_backup, "add-gold": run_add_gold, "add-admin": run_add_admin,
                 "reset-token": run_reset_token, "deactivate": run_deactivate, "members": run_members,
                 "guidelines": run_guidelines}
