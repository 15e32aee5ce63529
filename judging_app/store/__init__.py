"""The judging store: its tables, connections and transactions, migrations, backups, and the
judges, tokens, sign-ins and sign-in limits kept in it."""
