"""The harness's crash model on the current page (ArtemisSites.torn): the broker syncs a page before it writes the
COMMIT (or PREPARE) of a transaction that paged messages there (PageTimedWriter: tx.delay, write, performSync,
tx.delayDone), so a cut or change before the end of such a transaction's last record is no crash's."""
from __future__ import annotations

from tests.faults.artemis import ArtemisSites
from tests.faults.model import Fault
from tests.faults.stores import campaign_demo, messages_files


def test_a_cut_of_the_current_page_before_a_committed_transactions_records_is_no_torn_tail(tmp_path):
    # make fuzz seed 5151 (demo-s3, seed 5151017456006126): the current page of 'telemetry' cut to 2,395 bytes
    # lost 58 messages, among them those of transactions 478 and 495 whose COMMITs are in the message journal:
    # the harness called it torn, and verify's CRITICAL a miss.
    from amqtool.formats.artemis.paging import PagedMessage, scan_page
    from amqtool.formats.artemis.records import scan_records_py

    store = campaign_demo(tmp_path / "store", 3)
    folder = next(p for p in (store / "data" / "paging").iterdir()
                  if (p / "address.txt").read_text().split("\n")[0] == "telemetry")
    page = folder / "000000002.page"
    rel = str(page.relative_to(store))
    buf = page.read_bytes()
    recs, _ = scan_page(buf)
    txs = [PagedMessage.decode(buf[o + 5:o + 5 + n]).transaction_id for _, o, n in recs]
    commits = {r[4] for p, t, v in messages_files(store) for r in scan_records_py(p.read_bytes(), t, v)[0]
               if r[0] == 18}
    last_synced = max(i for i, tx in enumerate(txs) if tx in commits)
    assert (txs[last_synced], recs[last_synced][1]) == (495, 8039)  # the last committed transaction's record
    assert all(tx not in commits for tx in txs[last_synced + 1:])
    synced_end = recs[last_synced][1] + recs[last_synced][2] + 6
    sites = ArtemisSites.read(store)
    (info,) = [p for p in sites.pages if p.rel == rel]
    assert info.current and info.synced == synced_end
    assert not sites.torn(Fault("truncate", rel, 2395))  # the campaign's fault: synced records cut
    assert not sites.torn(Fault("truncate", rel, synced_end - 1))
    assert sites.torn(Fault("truncate", rel, synced_end))  # what was written after the last sync: a crash's
    assert sites.torn(Fault("truncate", rel, recs[-1][1] + 10))
