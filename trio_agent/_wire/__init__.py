"""Sans-IO Responses protocol: server frames, the per-response state machine,
request builders and error classification. Nothing here does I/O or reads clocks."""
