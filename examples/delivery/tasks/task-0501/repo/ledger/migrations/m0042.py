def currency_column_sql():
    return "ALTER TABLE accounts ADD COLUMN currency TEXT NOT NULL"
