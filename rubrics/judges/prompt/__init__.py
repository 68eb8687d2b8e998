"""The judge prompt: its text, its id, and the token layout that fences the evidence."""
