def to_csv(rows):
    return "".join(",".join(map(str, row)) + "\n" for row in rows)
