from decimal import ROUND_HALF_UP, Decimal


def line_total(quantity, unit_price):
    return float((Decimal(str(quantity)) * Decimal(str(unit_price))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
