"""`amqtool export` (being built in this session)."""
