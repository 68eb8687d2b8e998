def heads(revisions):
    return sorted({r for r, _ in revisions})
