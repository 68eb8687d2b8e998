"""A panel of judges: the panel judge, its members, and how much they agree."""
