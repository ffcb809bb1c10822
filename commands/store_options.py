"""The options that say where a store is, declared once for the commands that take them with the same help:
``print``, ``stat``, ``verify`` and ``export`` read a store named by a broker configuration or a JDBC URL;
``compact`` and ``recover`` also take the journal settings from broker.xml; ``check db`` and ``export``
reach a database. A command whose option says something else (``check``'s limits, ``bench``'s journal
settings) declares its own."""
from __future__ import annotations

import typer

BROKER_XML_OPTION = typer.Option(None, "--broker-xml", help="Artemis broker.xml: use the directories it names.")
BROKER_XML_SETTINGS_OPTION = typer.Option(None, "--broker-xml",
                                          help="Read directories and journal settings from this broker.xml.")
ACTIVEMQ_XML_KAHADB_OPTION = typer.Option(None, "--activemq-xml",
                                          help="ActiveMQ Classic activemq.xml: use its KahaDB or LevelDB store.")
JDBC_URL_OPTION = typer.Option(None, "--jdbc-url", help="A database store: jdbc:postgresql://host:port/db (user and "
                               "password from AMQTOOL_JDBC_USER/AMQTOOL_JDBC_PASSWORD or --jdbc-password-file).")
JDBC_PASSWORD_FILE_OPTION = typer.Option(None, "--jdbc-password-file",
                                         help="Read the database password from this file's first line.")
JDBC_TABLE_PREFIX_OPTION = typer.Option(None, "--jdbc-table-prefix",
                                        help="Classic JDBC: the adapter's tablePrefix (default: activemq.xml's, else "
                                        "none).")
