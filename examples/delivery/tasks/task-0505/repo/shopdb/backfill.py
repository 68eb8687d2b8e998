def full_name(first, middle, last):
    return first + " " + middle + " " + last if middle else first + last
