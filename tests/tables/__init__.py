"""Tables used only by the tests (loaded by module path, e.g.
``--table tests.tables.persist:Names``, with the repository on the path)."""
