"""Judging sessions at work: setting one up (from engines or result files), which query a judge gets
next, grades submitted, gold questions, the disagreement queue and time per judgment."""
