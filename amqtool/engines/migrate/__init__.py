"""ActiveMQ Classic -> Artemis, offline: :mod:`.convert` (one OpenWire message -> a core message, as Artemis'
``OpenWireMessageConverter`` does), :mod:`.plan` (a KahaDB or mKahaDB store -> Artemis addresses, queues and
the messages each queue holds), :mod:`.write` (``amqtool create DEST --from KAHADB``: a new Artemis data
directory) and :mod:`.xml` (``amqtool export KAHADB --format xml``: the ``data exp`` document)."""
