"""Task folders: layout, task.yaml, the catalog, tools files, hidden and expected tests, removal reasons, the folder check."""
