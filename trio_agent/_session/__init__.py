"""Sans-IO conversation state: history, the request prefix and context messages,
and the turn planner. Ids and "now" are passed in; nothing here does I/O."""
