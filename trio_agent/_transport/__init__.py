"""The only code that touches sockets and HTTP. Foreign exceptions are mapped into
``ResponsesError`` subclasses here, once, and never leak past this package."""
