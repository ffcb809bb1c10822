"""The fault campaign of ``make test`` (issue 25): a fixed-seed sample of 2,100 faults over two small demo
stores (paging, large messages, XA) and the broker-written fixture, each judged by ``verify`` and held to the
rule against the truth the broker-equal loaders give (tests/faults/model.py). ``make fuzz`` runs the same at
scale with other seeds, and prints each miss with the seed that reproduces it.

The rule's target is no miss at all. What this sample still misses is pinned, class by class, so that a
change can only lower it (a ratchet): each figure below is the exact count on this seed today, with what
those faults are. Lower a figure when a fix removes its misses; never raise one.
"""
from __future__ import annotations

from collections import Counter

import pytest

from tests.faults import campaign
from tests.faults.model import CONTENT, LOSS, SAME, TORN, UNPROVEN, confusion

pytestmark = pytest.mark.slow  # ~70 s (its 2,100 faults in two worker processes)

FAULTS_PER_STORE = 700
SEED = 25

# (truth, verdict) -> the misses this seed still has. What they are (bench/fuzz_verdicts.py lists them):
# - loss/OK: none left (1 before a message record whose user record type was flipped, its body still a message
#   and its references live, was judged: message_headers.py, message-record-retyped). (Since judged: the message journal deleted beside
#   its large-message body files or pages, messages-journal-missing; a reference's queue id moved onto a
#   queue the message is already on, ref-moved; an acknowledgement's id moved onto an id with no record,
#   ack-moved unless a deleted message one bit away could have owned it; found by make fuzz seeds 1126 and 5150:
#   a reference retyped as an acknowledgement right after its message's record, ref-retyped; a reference id
#   whose top byte was damaged, message-record-missing (ids are signed longs); a paging record too short for its
#   decode, record-undecodable; a page transaction's id damaged onto a deleted one, page-tx-dropped; a paged
#   message's transaction id damaged beyond every issued id, paged-message-tx-damaged.)
# - loss/WARNING: none left (6 before: a zeroed end of a message file that is not the newest where records were
#   lost -- room left for the next file's first record, or a record of this use damaged there while the ids
#   run on -- whose window of ids (amqtool/engines/artemis/tails.py) holds ids no surviving record carries
#   and no transaction the damage left open may have added: now CRITICAL by the odds, not by a proof. Such
#   ids are live messages lost there, or transaction ids and duplicate-detection records of messages deleted
#   since, which cannot be told apart. Zeroing from inside each second record of every non-newest file to
#   its end, in the four campaign demos and six JournalImpl stores (tests/data/artemis/tools/gen.sh), turned
#   loss/WARNING into CRITICAL far more often than same/WARNING: the figures are in the commit that made it.
#   Earlier, by zeroing in both demos (980 faults): 545 losses and 29 unchanged stores had nothing but such
#   ids; the 29 unchanged ones' ids were duplicate-id records, committed transactions of messages deleted
#   since, rolled-back messages and ids never stored. (Since judged,
#   7 before: the lost COMMIT of a transaction one of whose messages was delivered since,
#   committedTransactions; the lost PAGE_TRANSACTION of a paged transaction partly acknowledged,
#   pageTransactionsLost; a queue binding lost while its page cursor or counter records live on. Since judged
#   before: the current page deleted, page-missing from the counters with a page transaction or a body file
#   that agree; a data file deleted from the middle of a journal never compacted is CRITICAL
#   missing-journal-file when an acknowledgement, or several updates, lost their message's records, or the
#   page counters show lost records, and a WARNING when only broker.xml could tell, journal-pool-files letting
#   the broker delete freed files, as real JournalImpl stores show: tests/data/artemis.)
# - same/CRITICAL: a cut of a file that is not the newest whose lost records were all dead but whose window
#   cannot show it (a transaction left open whose ROLLBACK was lost there: a lost COMMIT would leave the same
#   records; a cut whose window ids were all deleted since is a warning). (1 more before stop 31: zeroed bytes
#   wiping three records, one of whose ids is gone with them, no miss since the truth counts the broker's
#   duplicate-detection cache and a run that leaves only room for records no id shows is a warning. 1 more
#   before, the cut
#   only record of the newest bindings file, the ID_COUNTER the broker writes as it stops, was judged a torn
#   tail of the current file: current_file.py. 1 more before a zeroed record whose
#   intact head names a record deleted since was judged: partial_record.py; 34 before
#   short-file, bad-file-id, file-id-damaged, rolled-back transactions and misfiled references were judged by
#   the evidence; 2 more before a lost page transaction was weighed by its paged messages still to consume:
#   paging/page_tx.py.)
# - torn/CRITICAL: none left (3 before damage confined to the last record of a current page was judged a torn
#   tail: paging/crash_tail.py). A cut tail of the newest file whose lost records other records still need is
#   CRITICAL by design when the dependants show (tests/faults/model.py DEPENDANTS), which is no miss.
# loss-unproven (any verdict but UNKNOWN) is counted apart: losses that leave a store a broker could have written.
KNOWN_MISSES = {("loss", "OK"): 0, ("loss", "WARNING"): 0, ("same", "CRITICAL"): 1, ("torn", "CRITICAL"): 0,
                ("content", "UNKNOWN"): 0}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    stores = campaign.pristine_stores(tmp_path_factory.mktemp("pristine"), demos=2)
    return campaign.run(stores, FAULTS_PER_STORE, SEED)


def test_sample_is_large_and_covers_every_truth(outcomes):
    assert len(outcomes) >= 2000
    truths = Counter(o.truth for o in outcomes)
    assert all(truths[t] > 0 for t in (SAME, CONTENT, LOSS, TORN, UNPROVEN)), truths
    # the unproven losses are their own row of the table, never folded into another
    assert any(line.startswith(UNPROVEN) for line in confusion(outcomes).splitlines())


def test_misses_only_go_down(outcomes):
    misses = Counter((o.truth, o.verdict) for o in outcomes if not o.ok)
    over = {k: (n, KNOWN_MISSES.get(k, 0)) for k, n in misses.items() if n > KNOWN_MISSES.get(k, 0)}
    print(confusion(outcomes))
    assert not over, f"more misses than pinned {over}\n" + confusion(outcomes)


def test_no_verdict_is_unknown_on_a_readable_store(outcomes):
    # every damaged copy is readable: UNKNOWN would mean the check itself broke
    assert not [o for o in outcomes if o.verdict == "UNKNOWN"], confusion(outcomes)
