"""amqtool: storage administration for ActiveMQ Artemis and ActiveMQ Classic message stores.

The library (formats, store, engines) never imports typer or rich and never prints; the command line lives
in ``amqtool.commands`` and host inspection in ``amqtool.inspectors``.
"""
__version__ = "0.1.0"
