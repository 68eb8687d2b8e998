def line_total(quantity, unit_price):
    return round(quantity * unit_price, 2)
