"""Running attempts: batches, grading one attempt, the job pool, JUnit, result records, validation."""
