PATTERN = r"^(a+)+$"
