"""The demo's constants: manifest schema, routing types, the ID batch, its clock and vocabulary."""
from __future__ import annotations

MANIFEST_SCHEMA = "amqtool-demo-manifest/1"
MULTICAST, ANYCAST = 0, 1
ROUTING_NAMES = {MULTICAST: "MULTICAST", ANYCAST: "ANYCAST"}
ID_BATCH = 2**31 - 1  # AbstractJournalStorageManager.CHECKPOINT_BATCH_SIZE = Integer.MAX_VALUE
BASE_TIME = 1_717_200_000_000  # 2024-06-01T00:00:00Z, the demo's clock start (ms)
MIN_SIZE = 4 * 1024 * 1024
MAX_LISTED_RECORDS = 200_000  # expected.journals.*.live is null above this many live entries
_WORDS = ("order shipment invoice payment customer warehouse parcel route carrier status pending "
          "confirmed delivered returned priority express standard region north south east west "
          "quantity price amount total discount tax currency euro dollar item sku batch lot "
          "account ledger credit debit balance audit event trace span node broker queue topic").split()
