def down_sql():
    return "DROP INDEX idx_order_created"
