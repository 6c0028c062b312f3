"""Evidence readers: one module per kind of file. Each reader only reads text; nothing from the repository runs."""
