"""Judging sessions at work: judges and who may judge a session, setting one up (from engines or
result files), which query a judge gets next, grades, gold questions, disagreements, time spent."""
