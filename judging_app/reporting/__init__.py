"""What comes out of a session: its judgments read back, the report (Table 5), agreement between
judges, exports (CSV, qrels, golden data) and the admin page's figures."""
