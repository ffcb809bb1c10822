"""amqtool's Spark data source, the public doorway::

    from amqtool.spark import register
    register(spark)
    df = spark.read.format("amqtool").load("/backups/brokers/*")

See :mod:`amqtool.engines.export.datasource` for the options, the tables and how the reads are planned, and
:mod:`amqtool.engines.export.stream` for ``spark.readStream.format("amqtool")`` (the same registration).
pyspark is imported only when :func:`register` is called."""
from __future__ import annotations


def register(spark) -> None:
    """Register the ``amqtool`` data source with the SparkSession ``spark``."""
    from amqtool.engines.export.datasource import register as _register

    _register(spark)


__all__ = ["register"]
