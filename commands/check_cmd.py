"""`amqtool check` (being built in this session)."""
