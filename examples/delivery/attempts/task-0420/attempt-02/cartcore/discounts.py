def apply_discounts(price, rates):
    for r in rates:
        price = price * (1 - r)
    return round(price, 2)
