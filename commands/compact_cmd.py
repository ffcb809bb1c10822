"""`amqtool compact` (being built in this session)."""
