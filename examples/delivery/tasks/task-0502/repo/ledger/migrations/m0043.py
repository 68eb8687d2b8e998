def downgrade_statements():
    return ["ALTER TABLE entries DROP COLUMN amt"]
