def apply_discounts(price, rates):
    return round(price - sum(price * r for r in rates), 2)
