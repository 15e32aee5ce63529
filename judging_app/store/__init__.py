"""The judging store: its tables, connections and transactions, migrations, backups, judge
tokens, sign-ins that survive a reload, and the limits on sign-in attempts."""
