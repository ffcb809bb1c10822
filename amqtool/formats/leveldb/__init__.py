"""ActiveMQ Classic's LevelDB store (``<levelDB>``, ``<replicatedLevelDB>``), byte level.

* :mod:`.recordlog`: the store's own log files (``%016x.log``): ``'*'``, kind, CRC-32, length, data
  (``RecordLog.scala``), and the unit-of-work end records;
* :mod:`.records`: the hawtbuf protobuf payloads of ``records.proto`` and the index key encodings
  (``LevelDBClient``);
* :mod:`.table`, :mod:`.dblog`, :mod:`.manifest`: the LevelDB database the store keeps its index in (SST
  tables, the write-ahead log and its write batches, the MANIFEST's version edits), read directly: a LevelDB
  library opening the index would write to it (LOCK, a new MANIFEST, compactions);
* :mod:`.codecs`: snappy (SST blocks, ``logCompression=snappy``) and masked CRC-32C.
"""
