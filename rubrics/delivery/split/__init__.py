"""The held-out split: groups of near-duplicate tasks, then whole groups held out by seed."""
