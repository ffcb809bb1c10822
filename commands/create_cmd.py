"""`amqtool create` (being built in this session)."""
