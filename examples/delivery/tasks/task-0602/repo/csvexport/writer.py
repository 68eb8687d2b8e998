def to_csv(rows):
    out = ""
    for row in rows:
        out += ",".join(map(str, row)) + "\n"
    return out
