"""`amqtool bench` (being built in this session)."""
