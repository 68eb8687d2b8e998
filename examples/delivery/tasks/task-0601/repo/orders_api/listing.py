def customer_ids_to_fetch(orders):
    return [[o["customer_id"]] for o in orders]
