def convert(amount, rate_in, rate_out):
    return round(round(amount * rate_in, 0) * rate_out, 2)
