"""The database stores of both brokers: ActiveMQ Classic's JDBC persistence adapter (``ACTIVEMQ_MSGS``,
``ACTIVEMQ_ACKS``, ``ACTIVEMQ_LOCK``) and Artemis' database store (``JDBCJournalImpl`` tables).

* :mod:`.connection` — where the database is (``--jdbc-url``, activemq.xml/broker.xml data sources), the
  credentials (environment or a file, never argv), the dialect, and read-only sessions.
* :mod:`.classic_sql` — every SQL statement amqtool runs against a Classic store, one class per dialect.
* :mod:`.classic` — the live sets the broker's ``JDBCMessageStore``/``JDBCTopicMessageStore`` would recover,
  the lease locker's state, the print document and the verify findings.

Nothing here writes: every session is ``READ ONLY`` at ``REPEATABLE READ`` (one snapshot across tables), with
a short ``lock_timeout`` so amqtool gives up rather than queue behind a broker's DDL.
"""
