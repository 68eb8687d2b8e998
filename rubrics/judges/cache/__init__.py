"""Verdicts kept between runs: verdict_cache.py is the sqlite store and its keys, cached.py the judge that reads it
first."""
