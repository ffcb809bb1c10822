"""Pure codecs for the ActiveMQ Classic KahaDB store."""
