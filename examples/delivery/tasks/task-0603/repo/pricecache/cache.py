def cache_key(product_id, currency):
    return product_id
