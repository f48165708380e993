"""People's recorded speech from PyPI packages (recordings.py), labelled where sentences end and where people pause
inside them (labels.py), and `bench-turns`, which plays it into the end-of-turn rules (run.py)."""
