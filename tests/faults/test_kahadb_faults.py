"""Issue 25, KahaDB: a fixed-seed sample of faults over the broker-written KahaDB and mKahaDB fixtures, each
judged by verify and held to the rule against the truth (tests/faults/kahadb.py): loss CRITICAL, torn and
latent WARNING, same never CRITICAL; undetectable changes counted. The confusion table is printed (``-s``)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from amqtool.engines.kahadb import verify_store
from amqtool.store.layout import detect
from tests.faults.kahadb import LATENT, LOSS, SAME, KahaCampaign, confusion
from tests.support import KAHADB

# (fixture, store directory, faults): fewer on the stores that take longest to judge, 510 in all
STORES = [("basic", "kahadb", 90), ("gc", "kahadb", 170), ("tx", "kahadb", 150), ("mkahadb", "mkahadb", 100)]


# Seeds the campaign at scale (bench/fuzz_verdicts.py --kahadb) found missing, each fixed since and each with
# its own regression test; judged here again beside the sample.
PINNED = {"basic": (483640000660,  # db.data flip in a subscription key: OK while sub-b lost 100 messages
                    110000817,  # the same kind, another byte of the key
                    110000366,  # page 0: the producer audit's offset made negative (the truth took it for a loss)
                    220000138,  # a batch's size and checksum zeroed: the rest of the file hidden (CRITICAL)
                    47110001108,  # an index entry's id made another live message's id (delivered as before)
                    47110001515,  # zeros ending in a live record's batch control record, its checksum left
                    25130001099),  # db-11.log cut after a batch: acks lost, latent (was CRITICAL mismatch)
          # an order index entry's message id with a '0' flipped to ' ' (the truth split entries at the first
          # space and read a loss; the broker delivers the record's message: same)
          "tx": (313372001009,),
          "gc": (11261000411,  # low-priority root of fx.gc.q made the default tree's: read twice (CRITICAL)
                 20261001270)}  # page 0's version 7 made 5: order indexes unreadable, the index rebuilt


def seeds(i: int, count: int) -> range:
    base = 25_000 + i * 100_000
    return range(base, base + count)


@pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")
def test_kahadb_fault_sample_follows_the_rule(tmp_path):
    outcomes = []
    for i, (name, sub, count) in enumerate(STORES):
        campaign = KahaCampaign(name, KAHADB / name / sub, tmp_path)
        outcomes.extend(campaign.run_one(s) for s in (*seeds(i, count), *PINNED.get(name, ())))
    table = confusion(outcomes)
    print(table)
    assert len(outcomes) >= 500
    # the sample reaches every class that matters
    truths = {o.truth for o in outcomes}
    assert {SAME, LATENT, LOSS} <= truths, table
    misses = [o for o in outcomes if not o.ok]
    assert not misses, table


@pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")
def test_an_index_id_damaged_into_a_space_is_not_a_loss(tmp_path):
    # campaign seed 31337 (bench/fuzz_verdicts.py --kahadb 1): a flip in db.data turned a '0' of an order
    # index entry's message id into ' '; the broker reads the message at the entry's location, so what it
    # delivers is unchanged, and verify's WARNING kahadb-index-entry-damaged is right. The truth keyed its
    # entries "<id> <digest>" and split them at the first space: a loss/WARNING miss.
    campaign = KahaCampaign("tx", KAHADB / "tx" / "kahadb", tmp_path)
    o = campaign.run_one(313372001009)
    assert o.fault.path == "db.data" and o.fault.kind == "flip"
    assert (o.truth, o.verdict, o.codes) == (SAME, "WARNING", ("kahadb-index-entry-damaged",))


@pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")
def test_an_index_id_made_another_live_messages_id_is_a_damaged_entry(tmp_path):
    # campaign seed 4711: a db.data flip turned fx.bulk's entry for message ...:190 into ...:180, a message
    # live on fx.orders under its own entry. The broker reads 190's record at the entry's location and
    # delivers both as before; verify took the id for a read that finds another message (CRITICAL
    # kahadb-unreadable-live-message) because the id it names is live in the journal.
    campaign = KahaCampaign("basic", KAHADB / "basic" / "kahadb", tmp_path)
    o = campaign.run_one(47110001108)
    assert o.fault.path == "db.data"
    assert (o.truth, o.verdict, o.codes) == (SAME, "WARNING", ("kahadb-index-entry-damaged",))


@pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")
def test_zeros_ending_in_a_live_batch_control_record_whose_checksum_holds_are_latent(tmp_path):
    # campaign seed 4711: 87 zeros from inside a dead record to inside the length/magic of the control
    # record of the next batch, which holds live message ...:435 alone. The control record's size and
    # Adler-32 survive and match the batch: the broker's read at the index's Location gets 435 as written;
    # only a replay (which no longer finds the batch) would lose it: latent, a WARNING (was CRITICAL).
    campaign = KahaCampaign("basic", KAHADB / "basic" / "kahadb", tmp_path)
    o = campaign.run_one(47110001515)
    assert o.fault.kind == "zero"
    assert (o.truth, o.verdict) == (LATENT, "WARNING")
    assert o.codes == ("kahadb-checksum-mismatch", "kahadb-rebuild-would-differ")


@pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")
def test_a_full_replay_that_meets_a_record_it_cannot_load_refuses_the_start(tmp_path):
    # bench/fuzz_kahadb_zeroed.py --seed 31337 (tx): 11 zeros over the checksum of the last batch and the top
    # bytes of its record's length, the ack-file map's (page 0's lastUpdate). recoverAckMessageFileMap cannot
    # load it, so MessageDatabase.recover replays the whole journal from its start; that walk reaches the
    # same record (now 141 bytes, its framed body cut) and load() throws: "Failed to recover data at
    # position", the broker does not start. The truth merged the replay's messages into the index's and
    # called it same (verify's CRITICAL was right); it now walks the replay as the broker does.
    from tests.faults.model import Fault

    campaign = KahaCampaign("tx", KAHADB / "tx" / "kahadb", tmp_path)
    fault = Fault("zero", "db-8.log", 64694, 11, label="zeroed into a header")
    campaign.sites.draw = lambda _rng: fault
    o = campaign.run_one(0)
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL")
    assert "kahadb-checkpoint-unreadable" in o.codes


@pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")
def test_a_checkpoint_record_the_full_replay_cannot_load_is_critical(tmp_path):
    # bench/fuzz_kahadb_zeroed.py --seed 31337 (gc), once the truth walks the full replay: zeros over the
    # checksum of the producer audit's batch and the top bytes of its length. recoverProducerAudit fails,
    # the whole journal is replayed, and the replay's load of that very record throws: the broker does not
    # start. verify said WARNING kahadb-checkpoint-unreadable (a replay that brings nothing back).
    from tests.faults.model import Fault

    campaign = KahaCampaign("gc", KAHADB / "gc" / "kahadb", tmp_path)
    fault = Fault("zero", "db-8.log", 38706, 11, label="zeroed into a header")
    campaign.sites.draw = lambda _rng: fault
    o = campaign.run_one(0)
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL")
    assert "kahadb-checkpoint-unreadable" in o.codes


@pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")
def test_reads_kept_across_faults_give_the_outcome_of_a_fresh_read(tmp_path):
    # The truth keeps each record's digest across faults by the record's bytes (kahadb._READ): a fault judged
    # with the reads of every fault before it gives what it gives with none kept.
    from tests.faults import kahadb

    campaign = KahaCampaign("basic", KAHADB / "basic" / "kahadb", tmp_path)
    kept = [campaign.run_one(s) for s in range(7_000, 7_060)]
    assert len(kahadb._READ) > 100
    for o in kept:
        kahadb._READ.clear()
        campaign._seen.clear()
        fresh = campaign.run_one(o.seed)
        assert (fresh.truth, fresh.verdict, fresh.codes) == (o.truth, o.verdict, o.codes), o.fault.describe()


@pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")
def test_two_priority_trees_made_one_are_critical(tmp_path):
    # bench/fuzz_verdicts.py --seed 1126 --kahadb 0.15: db.data@8322 ^0x01 turned fx.gc.q's low-priority
    # order-index root (page 3) into its default tree's (page 2). The broker walks the 20 entries twice and
    # poison-acknowledges each second read as a duplicate from the store; verify saw the same message ids as
    # the journal's and said OK with no finding.
    campaign = KahaCampaign("gc", KAHADB / "gc" / "kahadb", tmp_path)
    o = campaign.run_one(11261000411)
    assert (o.fault.path, o.fault.offset, o.fault.length) == ("db.data", 8322, 1)
    assert (o.truth, o.verdict, o.codes) == (LOSS, "CRITICAL", ("kahadb-index-duplicate-entry",))


@pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")
def test_an_index_the_broker_rebuilds_names_no_missing_file(tmp_path):
    # bench/fuzz_verdicts.py --seed 2026: db.data@4151 ^0x02 made page 0's version 7 into 5. Read as version 5
    # the order indexes do not decode, so MessageDatabase.open discards db.data and rebuilds it from the
    # journal, which delivers what it did. verify read the location indexes with 8-byte keys and called 40
    # garbage file ids CRITICAL kahadb-missing-journal-file.
    campaign = KahaCampaign("gc", KAHADB / "gc" / "kahadb", tmp_path)
    o = campaign.run_one(20261001270)
    assert (o.fault.path, o.fault.offset, o.fault.length) == ("db.data", 4151, 2)
    assert (o.truth, o.verdict, o.codes) == (SAME, "WARNING", ("kahadb-index-unreadable",))


@pytest.mark.skipif(not KAHADB.is_dir(), reason="KahaDB fixtures not present")
def test_an_older_file_cut_after_a_batch_is_latent_damage(tmp_path):
    # bench/fuzz_verdicts.py --seed 2513 --kahadb 1.0: db-11.log (not the newest) truncated to 124321, a batch
    # boundary. The broker writes the EOF record after every batch, so the file lost what followed; there, only
    # acknowledgements: the broker with its index delivers the same, a rebuild would bring back 21 messages.
    # verify saw a journal ending cleanly and called the index's difference CRITICAL index-journal-mismatch.
    campaign = KahaCampaign("basic", KAHADB / "basic" / "kahadb", tmp_path)
    o = campaign.run_one(25130001099)
    assert (o.fault.kind, o.fault.path, o.fault.offset) == ("truncate", "db-11.log", 124321)
    assert (o.truth, o.verdict) == (LATENT, "WARNING")
    assert o.codes == ("kahadb-rebuild-would-differ", "kahadb-truncated-file")


F12 = Path(__file__).resolve().parents[1] / "data" / "kahadb" / "f12-subs-kill"


def test_a_subscription_is_handed_only_what_its_selector_matches():
    # f12-subs-kill (a real 5.17 broker, SIGKILLed): durable subscription none's selector color='purple' matches
    # none of the 52 topic messages the store keeps pending for it (the broker stores a topic message for every
    # subscription while it is offline). Restarted on a copy, the broker hands it none of them
    # (TopicStorePrefetch.recoverMessage: subscription.matches): broker-delivered.json. The truth counted all 52
    import json

    from tests.faults.kahadb import _id_of, delivered

    broker = json.loads((F12 / "broker-delivered.json").read_text())["pristine"]
    state = delivered(F12 / "kahadb")["kahadb"]
    got = {sk: sorted(_id_of(x) for x in v) for (_k, sk), v in state["subs"].items()}
    got.update({"/queue/" + k.split(":", 1)[1]: sorted(_id_of(x) for x in v) for k, v in state["dests"].items()
                if k.startswith("0:")})
    assert got == broker and got["f12-none:none"] == [] and len(got["f12-all:all"]) == 75


def test_an_index_rebuilt_where_a_selector_matches_nothing_delivers_the_same(tmp_path):
    # campaign seed 8343 (f12-subs-kill: 23 loss/WARNING and one loss/OK, db.data deleted or unreadable): the
    # broker rebuilds the index from the journal and hands every subscription what it did before
    # (broker-delivered.json, "db.data deleted"); the truth read a loss from subscription none's unfiltered
    # pending messages and from the topic's own list, which no one is handed
    from tests.faults.kahadb import classify
    from tests.faults.model import Fault

    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    undo = Fault("delete", "db.data").apply(c.root)
    try:
        assert classify(c.pristine_delivered, c.pristine_rebuilt, c.root) == SAME
    finally:
        undo()
    assert c.run_one(83430000138).truth == SAME  # the campaign's draw of that fault


def test_damage_to_a_message_no_selector_matches_is_latent(tmp_path):
    # campaign seed 8343 (f12-subs-kill, 83430000456: db-1.log@1088 ^0x5f, same judged CRITICAL): the batch holds a
    # topic message subscription all acknowledged; it is still pending for subscription none, whose selector
    # color = 'purple' does not match it, so the broker never hands it out (broker-delivered.json) and never
    # reads the record: a checksum mismatch no consumer meets, WARNING (amqtool/engines/kahadb/unhanded.py)
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    o = c.run_one(83430000456)
    assert (o.fault.path, o.fault.offset, o.fault.length) == ("db-1.log", 1088, 0x5f)
    assert (o.truth, o.verdict) == (SAME, "WARNING") and "kahadb-checksum-mismatch" in o.codes


F13 = Path(__file__).resolve().parents[1] / "data" / "kahadb" / "f13-mkahadb-topics-kill"


def test_the_truth_of_an_mkahadb_store_with_selectors_is_what_the_broker_hands_out():
    # f13-mkahadb-topics-kill (a real 5.17 broker, SIGKILLed right after a transaction across its topic and
    # queue stores): restarted on a copy, the broker hands each queue and durable subscription (one with the
    # selector color = 'blue') exactly what the truth's loaders say (broker-delivered.json)
    import json

    from tests.faults.kahadb import _id_of, delivered

    broker = json.loads((F13 / "broker-delivered.json").read_text())["pristine"]
    got = {}
    for state in delivered(F13 / "mkahadb").values():
        got.update({sk: sorted(_id_of(x) for x in v) for (_k, sk), v in state["subs"].items()})
        got.update({"/queue/" + k.split(":", 1)[1]: sorted(_id_of(x) for x in v)
                    for k, v in state["dests"].items() if k.startswith("0:")})
    assert got == broker


def test_a_checkpoint_moved_past_the_newest_files_records_is_judged_from_the_checkpoint_records(tmp_path):
    # campaign seed 8343 (f13, 83431000126: the topic store's page 0 lastUpdate 6:1152 flipped to 6:9344, in
    # the zeros after the newest file's records; loss judged WARNING): the broker's walk reads a zero header
    # there, moves to the next file, finds none and replays nothing, so the cross-store transaction committed
    # after the checkpoint is lost. The checkpoint's own records (producer audit 6:365, ack map 6:1152) are
    # written just before lastUpdate: judged from 6:1152, the skip loses two topic messages (CRITICAL)
    c = KahaCampaign("f13", F13 / "mkahadb", tmp_path)
    o = c.run_one(83431000126)
    assert o.fault.path.endswith("/db.data") and (o.fault.offset, o.fault.length) == (4136, 0x20)
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and "kahadb-replay-skips" in o.codes


def test_a_subscription_whose_journal_record_is_damaged_still_gets_what_the_replay_adds(tmp_path):
    # campaign seed 8343 (f13, 83431000187 and 83431000567: loss judged WARNING): a flipped byte in the journal
    # record of subscription t1-all (db-1.log, long before the checkpoint). The index holds the subscription;
    # the replay after the checkpoint adds the last transaction's topic message to every subscription the index
    # holds (updateIndex(KahaAddMessageCommand): addAckLocationForNewMessage). The truth gave it only to those
    # the rebuild, which lost t1-all, had pending. The real broker (defaults), restarted on the damaged copy,
    # hands every consumer what it did (broker-delivered.json): latent, WARNING
    c = KahaCampaign("f13", F13 / "mkahadb", tmp_path)
    for seed in (83431000187, 83431000567):
        o = c.run_one(seed)
        assert o.fault.path.endswith("/db-1.log") and (o.truth, o.verdict) == (LATENT, "WARNING")


def test_a_damaged_prepare_whose_commit_follows_is_latent(tmp_path):
    # campaign seed 8343 (f13, 83431000069/071/088/474/505: same judged CRITICAL): the newest file of the topic
    # store holds, after the checkpoint, the child's part of the last cross-store transaction: two sends, a
    # PREPARE, a COMMIT, each in its own batch. Damage to the PREPARE's batch makes the broker skip it (the
    # newest file's corrupted blocks), and the COMMIT after it applies the sends all the same: process(
    # KahaCommitCommand) takes them from the in-flight transactions when no PREPARE moved them. WARNING
    c = KahaCampaign("f13", F13 / "mkahadb", tmp_path)
    for seed in (83431000069, 83431000071, 83431000088, 83431000474, 83431000505):
        o = c.run_one(seed)
        assert o.fault.path.endswith("/db-6.log") and 3489 <= o.fault.offset < 3517
        assert (o.truth, o.verdict) == (SAME, "WARNING"), (seed, o.codes)


def test_a_damaged_ack_of_a_message_the_selector_does_not_match_is_latent(tmp_path):
    # campaign seed 8343 (f12-subs-kill, 83430000072/253/270/373/405/406: same judged CRITICAL): after the
    # checkpoint the broker wrote, for each topic message, an UNMATCHED ack (a zero-length ack) for the
    # subscriptions whose selector it does not match (red, none). A damaged batch holding one is skipped (the
    # newest file) or replayed as read: the message stays pending for that subscription, which is never handed
    # it (TopicStorePrefetch.recoverMessage applies the selector). WARNING
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    for seed in (83430000072, 83430000253, 83430000270, 83430000373, 83430000405, 83430000406):
        o = c.run_one(seed)
        assert (o.truth, o.verdict) == (SAME, "WARNING"), (seed, o.fault, o.codes)


def test_the_index_s_subscription_records_give_the_selectors(tmp_path):
    # campaign seed 8353 (f12-subs-kill): 83530000055, a flipped byte in the batch of db-1.log holding the
    # subscription records: the journal lost subscription none's selector, the index keeps it (its
    # subscriptions B-tree, what the broker with it recovers); the truth took the journal's and read none's 52
    # unmatched messages as handed back (loss judged WARNING). 83530000222: page 0's openwireVersion 11 flipped
    # to 9: the real broker restarted on that copy hands out the same (broker-delivered.json); the truth, which
    # read the messages for the selector with version 9, failed and kept them all
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    assert (c.run_one(83530000055).truth, c.run_one(83530000222).truth) == (LATENT, SAME)


def test_a_send_the_walk_replays_under_a_damaged_id_is_judged_by_the_selectors_too(tmp_path):
    # campaign seed 8353 (f12-subs-kill, 83530000099: loss judged WARNING): a flipped bit in a topic send's message
    # id in db-7.log, an older file after the checkpoint: the walk replays it under the damaged id, and the
    # UNMATCHED ack of the real id for subscription red finds nothing, so red keeps it pending. Its selector does
    # not match it: the real broker restarted on that copy hands every consumer what it did
    # (broker-delivered.json). The truth did not know where the damaged id's message lay and kept it for red
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    o = c.run_one(83530000099)
    assert (o.fault.path, o.fault.offset) == ("db-7.log", 5470)
    assert (o.truth, o.verdict) == (LATENT, "WARNING")


def test_a_damaged_unmatched_ack_in_an_older_file_is_latent(tmp_path):
    # campaign seed 8343 (f12-subs-kill, 83430000009 and 83430000464: same judged CRITICAL): a flipped byte in the
    # message id of an UNMATCHED ack (a zero-length ack: the broker writes one for a subscription whose selector
    # does not match the message) in an older file after the checkpoint. Whatever the walk makes of it, the
    # message stays pending for a subscription whose selector does not match it: never handed out. WARNING
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    for seed in (83430000009, 83430000464):
        o = c.run_one(seed)
        assert (o.truth, o.verdict) == (SAME, "WARNING"), (seed, o.fault, o.codes)


def test_an_unmatched_ack_the_walk_steps_over_in_an_older_file_is_latent(tmp_path):
    # campaign seed 9104 (f12-subs-kill, 91043000049 and 91043000089: latent judged CRITICAL): the record type byte
    # of an UNMATCHED ack in db-7.log, after the checkpoint 6:3934, flipped (1 to 3, 1 to 0x81). db-7.log is not
    # the newest: with checkForCorruptJournalFiles off, Journal.start recoveryChecks only the newest file, so no
    # corrupted block covers the batch, and Journal.getNextLocation returns only USER_RECORD_TYPE records: the
    # broker's replay applies the batch's send and its other ack, and steps over this one. The message then
    # stays pending for a subscription whose selector does not match it (49: red, color = 'red', message
    # :8:-1:1:57), and TopicStorePrefetch.recoverMessage hands a subscription only what matches: the broker
    # delivers the same. A rebuild that skips the batch on its checksum loses the send for subscription all:
    # latent, WARNING
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    o = c.run_one(91043000049)
    assert (o.fault.path, o.fault.offset, o.fault.length) == ("db-7.log", 31699, 2)
    assert (o.truth, o.verdict) == (LATENT, "WARNING") and "kahadb-checksum-mismatch" in o.codes
    o = c.run_one(91043000089)
    assert (o.fault.path, o.fault.offset, o.fault.length) == ("db-7.log", 9356, 0x80)
    assert (o.truth, o.verdict) == (LATENT, "WARNING") and "kahadb-checksum-mismatch" in o.codes


def test_an_unmatched_ack_replayed_onto_a_destination_without_its_message_is_latent(tmp_path):
    # campaign seed 9104 (f12-subs-kill, 91043000098: latent judged CRITICAL): db-7.log@30856, a bit of the topic
    # name fx.f12.t of subscription none's UNMATCHED ack of :8:-1:1:56 (after the checkpoint, in an older file:
    # replayed as read). updateIndex(KahaRemoveMessageCommand) looks the id up in the messageIdIndex of the
    # destination the ack names (getStoredDestination makes an empty one for a name it does not know), finds
    # nothing and does nothing; the ack it was is lost, which leaves 56 pending for none, whose selector
    # color = 'purple' does not match it: the broker delivers the same. Latent, WARNING
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    o = c.run_one(91043000098)
    assert (o.fault.path, o.fault.offset, o.fault.length) == ("db-7.log", 30856, 8)
    assert (o.truth, o.verdict) == (LATENT, "WARNING") and "kahadb-checksum-mismatch" in o.codes


def test_a_subscription_ack_entry_under_a_damaged_key_is_no_one_s(tmp_path):
    # campaign seed 9401 (f12-subs-kill, 94013000290: same judged loss by the truth): db.data@36910, a bit of the
    # key f12-none:none in the topic's subscriptionAcks B-tree (page 8) flipped to f12-noneznone. The broker
    # recovers its durable subscriptions from the subscriptions B-tree (KahaDBTopicMessageStore
    # .getAllSubscriptions: each entry's SubscriptionInfo) and hands each its messages by clientId:subscriptionName
    # (recoverNextMessages), so nothing is handed under the damaged key; none, without its LastAck, is handed
    # nothing ("sub deleted"), and its selector color = 'purple' matched nothing anyway. The truth took the
    # damaged key for a subscription and read its 84 unfiltered pending messages as handed out
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    o = c.run_one(94013000290)
    assert (o.fault.path, o.fault.offset, o.fault.length) == ("db.data", 36910, 0x40)
    assert (o.truth, o.verdict) == (SAME, "WARNING")


def test_a_subscription_without_its_last_ack_is_handed_nothing(tmp_path):
    # campaign seed 9401 (f12-subs-kill, 94013000342: loss judged WARNING): db.data@36890, a bit of the key
    # f12-all:all in the subscriptionAcks B-tree flipped. Subscription all (no selector) is still recovered from
    # the subscriptions B-tree, but recoverNextMessages finds no LastAck under its key and returns nothing
    # ("sub deleted"): its 75 pending messages are lost to it. verify compared the index's subscriptions with
    # the journal only when no record follows the checkpoint; the index itself shows it (sub_cursors.py)
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    o = c.run_one(94013000342)
    assert (o.fault.path, o.fault.offset, o.fault.length) == ("db.data", 36890, 0x20)
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and "kahadb-subscription-no-cursor" in o.codes


def test_an_acknowledged_message_of_a_transaction_the_child_committed_before_the_checkpoint_comes_back(tmp_path):
    # campaign seed 9401 (f13, 94014000329: loss judged WARNING): the queue store's db-3.log zeroed over 12742+454,
    # which damages the batch of the ack of :4:-1:1:102 and the producer audit record page 0 names (3:12942). The
    # broker cannot load the audit and replays the whole journal on top of its index; db-3.log is its newest file,
    # so the damaged batch is a corrupted block the walk skips, and 102, sent in the cross-store transaction
    # whose COMMIT the queue store wrote long before the checkpoint 3:13729, comes back. verify took every
    # transactional message the index lacks for one a txStore commit may not have put in the child's index yet
    # (load._reconcile), so it saw nothing brought back: WARNING. A child's own COMMIT before the checkpoint is in
    # its index (process(KahaCommitCommand) runs before lastUpdate moves past it)
    c = KahaCampaign("f13", F13 / "mkahadb", tmp_path)
    o = c.run_one(94014000329)
    assert o.fault.path.endswith("fx.f13.q/db-3.log") and (o.fault.offset, o.fault.length) == (12742, 454)
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and "kahadb-checkpoint-unreadable" in o.codes


def test_a_renamed_send_whose_acks_are_all_by_subscriptions_it_does_not_match_is_latent(tmp_path):
    # campaign seed 9401 (f12-subs-kill, 94013000136: latent judged CRITICAL): db-6.log@8924, a byte of the message
    # id of topic send :8:-1:1:6 ('vm' read 'vk'), in an older file after the checkpoint 6:3934: the walk
    # replays it under the damaged id (no corrupted block outside the newest file), and the UNMATCHED acks of
    # the real id by red and none find nothing, so the message stays pending for them. Neither selector matches
    # it (TopicStorePrefetch.recoverMessage never hands it to them); subscription all gets the same OpenWire
    # message, which carries its own id. verify took any ack of the real id for one that brings it back
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    o = c.run_one(94013000136)
    assert (o.fault.path, o.fault.offset, o.fault.length) == ("db-6.log", 8924, 6)
    assert (o.truth, o.verdict) == (LATENT, "WARNING") and "kahadb-checksum-mismatch" in o.codes


def test_the_checkpoints_file_swapped_with_the_next_is_read_as_the_index_knew_it(tmp_path):
    # campaign seeds 9403 and 9404 (f12-subs-kill, 94033000328 and 94043000015; f7-kill-gc 94050000254 and
    # 94050000260 the same: latent judged CRITICAL): db-6.log <-> db-7.log, the checkpoint 6:3934. Page 0's
    # producer audit (6:3136) and ack map (6:3934) no longer load, so the broker replays the whole journal onto
    # its index (5.17 MessageDatabase.recoverProducerAudit: "Cannot recover message audit", then
    # journal.getNextLocation(null)), and adds the topic sends :8:-1:1:27 ... of the old db-7.log, after the
    # checkpoint, as the pristine store's replay does. verify took each send the index lacks at a location
    # before the checkpoint (now 6:...) for one it knows acknowledged, brought back. Both checkpoint records
    # load at their offsets of db-7.log: that file is the index's db-6 (damage.checkpoint_moved)
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    for seed in (94033000328, 94043000015):
        o = c.run_one(seed)
        assert (o.fault.kind, o.fault.path, o.fault.other) == ("swap", "db-6.log", "db-7.log")
        assert (o.truth, o.verdict) == (LATENT, "WARNING") and "kahadb-checkpoint-unreadable" in o.codes
    from amqtool.engines.kahadb.damage import checkpoint_moved
    from amqtool.engines.kahadb.load import load_store
    from amqtool.store.layout import detect

    assert checkpoint_moved(load_store(detect(F12 / "kahadb"), reconcile=False)[0]) == {}
    undo = o.fault.apply(c.root)
    try:
        assert checkpoint_moved(load_store(detect(c.root), reconcile=False)[0]) == {6: 7, 7: 6}
    finally:
        undo()


def test_a_subscription_info_recovered_under_another_key_loses_its_pending_messages(tmp_path):
    # false OK (f1-small-files, 12 db.data flips in a topic's subscriptions B-tree, OK) and loss/WARNING here: a
    # bit of f12's subscriptions B-tree (db.data@32874 ^0x01) makes the SubscriptionInfo of f12-all:all read
    # client id f02-all, its B-tree key and its LastAck intact. The 5.17 broker recovers the durable
    # subscription from that info (KahaDBTopicMessageStore.getAllSubscriptions) as f02-all:all, which has no
    # LastAck ('sub deleted': nothing handed), and none as f12-all:all: its 75 pending messages go to no one.
    # verify looked only for a recovered subscription without its LastAck that the journal keeps messages
    # pending for (under the damaged key, none)
    from tests.faults.kahadb import classify
    from tests.faults.model import Fault

    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path / "scratch")
    root = tmp_path / "kahadb"
    shutil.copytree(F12 / "kahadb", root)
    Fault("flip", "db.data", 32874, 0x01).apply(root)
    assert (root / "db.data").read_bytes()[32860:32880].endswith(b"\x07f02-all")
    findings, _ = verify_store(detect(root))
    (lost,) = [f for f in findings if f.code == "kahadb-subscription-no-cursor"]
    assert lost.severity.name == "CRITICAL" and (lost.details["subscription"], lost.details["lost"]) == \
        ("f12-all:all", 75)
    assert classify(c.pristine_delivered, c.pristine_rebuilt, root) == LOSS


def test_an_order_index_key_moved_across_a_subscription_cursor_is_critical(tmp_path):
    # campaign seed 9404 (f12-subs-kill, 94043000118: loss judged WARNING): db.data@82004 ^0x01 made the order-index
    # key of topic message :4:-1:1:52 65564 instead of 28; its messageIdIndex and locationIndex entries still say
    # 28. The 5.17 broker hands a durable subscription the order index's entries after its LastAck (or those its
    # ackPositions hold): f12-all, which acknowledged it (LastAck past 28), is handed it again. verify saw the
    # same ids and locations as the journal's and nothing else
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    o = c.run_one(94043000118)
    assert (o.fault.kind, o.fault.path, o.fault.offset, o.fault.length) == ("flip", "db.data", 82004, 1)
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and "kahadb-index-entry-moved" in o.codes
    undo = o.fault.apply(c.root)
    try:
        findings, _ = verify_store(detect(c.root))
    finally:
        undo()
    (moved,) = [f for f in findings if f.code == "kahadb-index-entry-moved"]
    assert moved.details["messageIds"] == ["ID:vm-35845-1795736320241-3:4:-1:1:52"]
    assert moved.details["subscriptions"] == ["f12-all:all"]


def test_an_unmatched_ack_under_a_damaged_subscription_key_is_latent(tmp_path):
    # campaign seed 9403 (f12-subs-kill, 94033000219: latent judged CRITICAL): db-7.log@27090 ^0x44, in db-7, an
    # older file after the checkpoint 6:3934: subscription red's ack of :8:-1:1:53 reads 'f12-red:r!d'. The walk
    # replays it under that key: updateIndex(KahaRemoveMessageCommand) finds no ackPositions entry for it
    # (removeAckLocation removes nothing) and the LastAck it stores there is no subscription's. Red loses an
    # UNMATCHED ack of a message its selector does not match, which TopicStorePrefetch.recoverMessage never hands
    # it: the same delivered. verify counted only an ack of a message the destination does not hold as one
    # that takes nothing
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    o = c.run_one(94033000219)
    assert (o.fault.path, o.fault.offset, o.fault.length) == ("db-7.log", 27090, 0x44)
    assert (o.truth, o.verdict) == (LATENT, "WARNING") and "kahadb-checksum-mismatch" in o.codes


def test_an_ack_under_a_subscription_key_nobody_has_acks_nothing():
    # after_acks.acks_nothing: the same ack under its own key takes a message red has pending; under a key no
    # subscription of the topic has, nothing (the predicate judges the command, whatever the selector)
    from amqtool.engines.kahadb.after_acks import acks_nothing
    from amqtool.engines.kahadb.load import load_store
    from amqtool.formats.kahadb.commands import Destination, EntryType, RemoveMessageCommand
    from amqtool.store.layout import detect

    d = load_store(detect(F12 / "kahadb"))[0]
    idle = acks_nothing(d)
    topic = Destination(1, "fx.f12.t")
    mid = next(m.message_id for m in d.indexed[topic.key].messages)
    ack = RemoveMessageCommand(EntryType.REMOVE_MESSAGE, destination=topic, message_id=mid,
                               subscription_key="f12-red:red")
    assert not idle(ack)
    assert idle(RemoveMessageCommand(EntryType.REMOVE_MESSAGE, destination=topic, message_id=mid,
                                     subscription_key="f12-red:r!d"))
    # a message the caller counts as held (a send of the damaged batch itself) is no ack that takes nothing
    gone = RemoveMessageCommand(EntryType.REMOVE_MESSAGE, destination=topic, message_id="ID:none:1:1:1:1",
                                subscription_key="f12-red:red")
    assert idle(gone) and not idle(gone, {(topic.key, "ID:none:1:1:1:1")})


F11 = Path(__file__).resolve().parents[1] / "data" / "kahadb" / "f11-shrink-kill"


def test_a_failing_batch_with_a_later_write_after_it_is_no_torn_tail(tmp_path):
    # campaign seed 9403 (f11-shrink-kill, 94032000279: loss judged WARNING): the newest file db-3.log zeroed over
    # 9227+178, the end of the batch of send :1:-1:1:8 and the control record of the next batch (send 9), both
    # after the checkpoint. The broker's recoveryCheck of the newest file finds no batch after the failing one
    # and appends from 8384: both sends are lost. verify took the failing last batch for a write torn by a
    # crash, but the record of send 9 and the end marker after it are a later write: DataFileAppender writes a
    # batch and its end marker in one write over the preallocated zeros, so a torn write leaves only zeros
    # after it
    c = KahaCampaign("f11-shrink-kill", F11 / "kahadb", tmp_path)
    o = c.run_one(94032000279)
    assert (o.fault.kind, o.fault.path, o.fault.offset, o.fault.length) == ("zero", "db-3.log", 9227, 178)
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and "kahadb-truncated-tail" not in o.codes


F8 = Path(__file__).resolve().parents[1] / "data" / "kahadb" / "f8-mkahadb-kill"


def test_record_bytes_after_a_size_0_batch_of_an_older_file_are_a_corrupt_range(tmp_path):
    # campaign seed 9404 (f8-mkahadb-kill, 94051000308: loss judged WARNING): fx.f8.grp's db-4.log, an older file,
    # zeroed over 15807+251: the size and checksum of the last batch's control record and most of its records;
    # the rest of them and the end marker after it remain. 5.17's recoveryCheck and a rebuild of the index take
    # a size-0 batch for the end of the data, and the replay walk (getNextLocation) steps over the control
    # record into the zeros, read as the end of the file: the batch's records are lost. The scan stopped there
    # too and nothing was reported; the bytes after it are no zero fill (the broker writes no size-0 batch)
    from tests.faults.model import Fault

    c = KahaCampaign("f8-mkahadb-kill", F8 / "mkahadb", tmp_path)
    d = next(x for x in c.sites.dirs if x.rel.endswith("f8.grp.#3e"))
    log = d.logs[-2]
    off, size = log.batches[-1]
    fault = Fault("zero", log.rel, off + 16, 12 + size - 20)
    o = c.run_fault(fault)
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and "kahadb-corrupt-range" in o.codes, o
    undo = fault.apply(c.root)
    try:
        findings, _ = verify_store(detect(c.root))
    finally:
        undo()
    (hit,) = [f for f in findings if f.code == "kahadb-corrupt-range"]
    assert (hit.offset, hit.details["reason"]) == (off, "zero-size-batch")
    assert off + 28 + size - 20 <= hit.details["last"] < off + 28 + size  # (the last record bytes that are not 0)


def test_a_batch_length_landing_inside_its_batch_whose_sends_are_acked_later_is_latent(tmp_path):
    # campaign seed 9404 (f8-mkahadb-kill, 94051000328: same judged CRITICAL): fx.f8.own's db-1.log@14031 ^0x02, the
    # length of the control record of the batch at 14028 (an older file, no checkpoint yet) read 30 for 28. The
    # walk (Journal.getNextLocation) steps 30 bytes, into the batch's first record, reads a header of type 0x80
    # and length 0x01880101 there, steps over it past the file's end: on to db-2.log. The two last batches of
    # db-1.log are lost to the replay, and their sends are acknowledged later in it: the same delivered. The same
    # flip in the batch before them steps over a send no later ack takes: loss
    from tests.faults.model import Fault

    c = KahaCampaign("f8-mkahadb-kill", F8 / "mkahadb", tmp_path)
    d = next(x for x in c.sites.dirs if x.rel.endswith("f8.own"))
    log = d.logs[0]
    assert [off for off, _size in log.batches[-3:]] == [13522, 14028, 14448]
    o = c.run_fault(Fault("flip", log.rel, 14028 + 3, 0x02))
    assert (o.truth, o.verdict) == (SAME, "WARNING") and "kahadb-corrupt-range" in o.codes, o
    o = c.run_fault(Fault("flip", log.rel, 13522 + 3, 0x02))
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL"), o


def test_zeros_from_inside_a_batch_through_the_end_marker_are_a_torn_write(tmp_path):
    # campaign seed 9612 (f8-mkahadb-kill, 96131000191: loss judged WARNING): fx.f8.own's newest file db-3.log
    # zeroed over 6154+426: the end of the batch at 5928 (an ack), the whole batch at 6240 (another ack) and the
    # end marker at 6552, all after the checkpoint (none yet). 5.17's DataFileAppender.processQueue writes a
    # batch and the end marker after it ("so read can always find eof") in one write at the previous end
    # marker, over the preallocated zeros: a crash cutting the write of the batch at 5928 short leaves these
    # bytes exactly (its first 226 bytes, then zeros), the batch at 6240 never written. The acks lost are a torn
    # tail's, which no reader can tell from that crash: torn, and verify's WARNING is right. (The opposite case
    # is the one above: bytes written after the failing batch.) The same zeros ending before the end marker
    # leave a later write's bytes: loss
    from tests.faults.kahadb import TORN
    from tests.faults.model import Fault

    c = KahaCampaign("f8-mkahadb-kill", F8 / "mkahadb", tmp_path)
    o = c.run_one(96131000191)
    assert (o.fault.kind, o.fault.path, o.fault.offset, o.fault.length) == \
        ("zero", "queue#3a#2f#2ffx.f8.own/db-3.log", 6154, 426)
    assert (o.truth, o.verdict) == (TORN, "WARNING") and "kahadb-truncated-tail" in o.codes
    assert c.sites.torn(o.fault)
    assert not c.sites.torn(Fault("zero", o.fault.path, 6154, 6552 + 4 - 6154))  # one byte of the marker left
    assert not c.sites.torn(Fault("zero", o.fault.path, 5928 + 4, 6557 - 5928 - 4))  # the old marker's last byte


def test_a_damaged_transactional_send_acked_after_its_commit_is_superseded(tmp_path):
    # campaign seeds 9401 and 9404 (f8-mkahadb-kill, 94021000205 and 94051000033: same judged CRITICAL): a byte of
    # the body of :1:-1:1:91 in db-4.log of fx.f8.grp.>, an older file (no checkpoint yet: all replayed). The send
    # is an XA transaction's, whose PREPARE and COMMIT follow it intact in db-4.log, and a queue ack in db-5.log
    # takes the message after that: 5.17's process(KahaCommitCommand) adds it, updateIndex(KahaRemoveMessageCommand)
    # removes it, and no consumer is ever handed the damaged bytes. verify counted a transactional send as undone
    # only when its local transaction was still open
    c = KahaCampaign("f8-mkahadb-kill", F8 / "mkahadb", tmp_path)
    for seed in (94021000205, 94051000033):
        o = c.run_one(seed)
        assert o.fault.path == "queue#3a#2f#2ffx.f8.grp.#3e/db-4.log" and 12959 <= o.fault.offset < 12959 + 1033
        assert (o.truth, o.verdict) == (SAME, "WARNING") and "kahadb-checksum-mismatch" in o.codes


def test_an_ack_the_walk_replays_before_its_send_takes_nothing(tmp_path):
    # campaign seed 9401 (f12-subs-kill, 94013000261: truth latent, verify CRITICAL kahadb-ack-before-send):
    # db-7.log and db-8.log swapped, both after the checkpoint 6:3934. The walk now replays subscription red's
    # acks of nine messages (:8:-1:1:27 ...) from the new db-7.log before their sends in the new db-8.log:
    # updateIndex(KahaRemoveMessageCommand) finds no sequence for the id in the messageIdIndex and does nothing,
    # then updateIndex(KahaAddMessageCommand) puts each send in every subscription's ack positions
    # (addAckLocationForNewMessage). Red's selector matches them (it acknowledged them with a real ack): the
    # broker hands them to red again. The truth applied a subscription's ack whatever came first
    # (kahadb_after._apply): loss, and verify's CRITICAL is right
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    o = c.run_one(94013000261)
    assert (o.fault.kind, o.fault.path, o.fault.other) == ("swap", "db-8.log", "db-7.log")
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and "kahadb-ack-before-send" in o.codes


F5 = Path(__file__).resolve().parents[1] / "data" / "kahadb" / "f5-kill"


def test_an_older_files_damaged_end_marker_is_latent(tmp_path):
    # campaign seed 9403 (f5-kill, 94038000156: same judged CRITICAL): db-8.log@65523 ^0xd6, in the end-of-data
    # marker '-qMa4' after the last batch of db-8.log, an older file after the checkpoint 4:47110; zeros and the
    # preallocated marker follow. Only the newest file is recoveryChecked at start: Journal.getNextLocation reads
    # the damaged marker as a header of type '4' whose size runs past the file's end and moves on to db-9.log, as
    # at the marker itself. Nothing the broker replays was there: the same delivered
    from tests.faults.model import Fault

    c = KahaCampaign("f5-kill", F5 / "kahadb", tmp_path)
    (d,) = c.sites.dirs
    log = next(x for x in d.logs if x.rel == "db-8.log")
    assert log.quiet
    for b in range(1, 5):
        o = c.run_fault(Fault("flip", log.rel, log.end + b, 0xD6))
        assert (o.truth, o.verdict) == (SAME, "WARNING") and "kahadb-corrupt-range" in o.codes, (b, o)
    # a negative size (its first byte 0xfb) sends the walk back into the file instead: the broker does not start
    o = c.run_fault(Fault("flip", log.rel, log.end, 0xD6))
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and "kahadb-recovery-stops" in o.codes
    undo = Fault("flip", log.rel, log.end + 2, 0xD6).apply(c.root)
    try:
        findings, _ = verify_store(detect(c.root))
    finally:
        undo()
    (hit,) = [f for f in findings if f.code == "kahadb-corrupt-range"]
    assert (hit.offset, hit.details["latent"], hit.details["toEof"]) == (log.end, True, True)


def test_two_messages_under_one_sequence_id_are_each_read_once(tmp_path):
    # campaign seeds 9401 and 9404 (f5-kill 94018000220, f10-shrink 94041000330: same judged CRITICAL): a bit of
    # an order-index key in db.data made topic fx.f5.t's entry of :2:-1:1:60 hold sequence 18, :2:-1:1:80's. The
    # broker reads each message once (recoverNextMessages walks the entries; the cursor's duplicate check is by
    # message id): the same delivered. kahadb-index-duplicate-entry is for one message's entry read twice (two
    # priority trees made one: test_two_priority_trees_made_one_are_critical); this is a damaged key, WARNING
    c = KahaCampaign("f5-kill", F5 / "kahadb", tmp_path)
    o = c.run_one(94018000220)
    assert (o.fault.kind, o.fault.path, o.fault.offset) == ("flip", "db.data", 12494)
    assert (o.truth, o.verdict) == (SAME, "WARNING") and "kahadb-index-entry-damaged" in o.codes
    assert "kahadb-index-duplicate-entry" not in o.codes



def test_a_topic_send_replayed_onto_a_topic_without_subscriptions_is_latent(tmp_path):
    # campaign seed 9403 (f5-kill, 94038000085 and 94038000112: same judged CRITICAL): a byte of the topic name
    # fx.f5.t in a send of db-6.log, an older file after the checkpoint 4:47110: the walk replays the send into
    # a topic of the damaged name (getStoredDestination makes it), which holds no durable subscription, so no
    # one is handed it there (a topic's stored messages go to its durable subscriptions only); every durable
    # subscription of fx.f5.t acknowledged the message after it, and those acks now find nothing. The broker
    # delivers the same
    c = KahaCampaign("f5-kill", F5 / "kahadb", tmp_path)
    for seed, offset in ((94038000085, 20837), (94038000112, 38046)):
        o = c.run_one(seed)
        assert (o.fault.path, o.fault.offset) == ("db-6.log", offset)
        assert (o.truth, o.verdict) == (SAME, "WARNING") and "kahadb-checksum-mismatch" in o.codes


def test_a_batch_the_walk_steps_over_by_a_damaged_header_length_whose_sends_are_acked_later_is_latent(tmp_path):
    # campaign seeds 9401 and 9403 (f5-kill, 94018000268 and 94038000060: same judged CRITICAL): a bit of the
    # length in the last batch's control record header of db-5.log or db-7.log, older files after the checkpoint
    # 4:47110. Journal.getNextLocation reads that header (not a user record) and moves on by the length it reads,
    # past the file's end: to the next file. The batch's sends are acknowledged later in the replay, whose acks
    # then find nothing: the broker delivers the same
    # 94048000065 (seed 9404): the length makes the walk step over the next batch of db-5.log too, whose sends
    # are acknowledged later as well
    c = KahaCampaign("f5-kill", F5 / "kahadb", tmp_path)
    for seed, path in ((94018000268, "db-5.log"), (94038000060, "db-7.log"), (94048000065, "db-5.log")):
        o = c.run_one(seed)
        assert (o.fault.path, o.fault.label) == (path, "batch length")
        assert (o.truth, o.verdict) == (SAME, "WARNING") and "kahadb-corrupt-range" in o.codes, (seed, o.codes)


def test_a_send_whose_priority_fields_keep_its_index_priority_is_replayed_unchanged(tmp_path):
    # campaign seed 9893 (f12-subs-kill, 98933000179: latent judged CRITICAL): db-6.log@5673 ^0x72, the last
    # byte of the send of ID:...:8:-1:1:2 to fx.f12.q in an older file after the checkpoint 6:3934: its
    # prioritySupported (field 6) read true for false, its priority 4. updateIndex(KahaAddMessageCommand) indexes
    # a send at prioritySupported ? priority : DEFAULT_PRIORITY (4), and dispatches its message bytes: the same
    # either way, so the walk's replay delivers the same (a rebuild skips the batch: latent)
    from amqtool.engines.kahadb.superseded import _effect
    from amqtool.formats.kahadb.commands import AddMessageCommand, EntryType

    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    o = c.run_one(98933000179)
    assert (o.fault.path, o.fault.offset, o.fault.length) == ("db-6.log", 5673, 0x72)
    assert (o.truth, o.verdict) == (LATENT, "WARNING") and "kahadb-checksum-mismatch" in o.codes, o
    sent = AddMessageCommand(EntryType.ADD_MESSAGE, message_id="m", message=b"x")
    assert _effect(sent) == _effect(AddMessageCommand(EntryType.ADD_MESSAGE, message_id="m", message=b"x",
                                                      priority=4, priority_supported=True))
    assert _effect(sent) == _effect(AddMessageCommand(EntryType.ADD_MESSAGE, message_id="m", message=b"x", priority=9))
    assert _effect(sent) != _effect(AddMessageCommand(EntryType.ADD_MESSAGE, message_id="m", message=b"x",
                                                      priority=9, priority_supported=True))


def test_a_subscription_whose_last_ack_key_is_damaged_gets_none_of_the_replays_sends(tmp_path):
    # campaign seed 9893 (f5-kill, 98938000037: loss judged WARNING): db.data@36892 ^0x01, the key f5-d:sd of
    # fx.f5.t's subscriptionAcks B-tree (page 8) read f5-e:sd. The broker's subscriptionCache is the
    # subscriptionAcks keys (MessageDatabase.loadStoredDestination), and a send the replay after the checkpoint
    # 4:47110 brings goes into the ack positions of the cached keys only (addAckLocationForNewMessage): none of
    # them reach f5-d:sd. Its acks in the replay write its LastAck back (updateIndex(KahaRemoveMessageCommand)),
    # past the ack positions [0, 23] the index keeps for it, so recoverNextMessages hands it only those: the
    # replay's sends pending for it are lost. verify took the written-back LastAck for a repaired cursor
    from tests.faults.model import Fault

    c = KahaCampaign("f5-kill", F5 / "kahadb", tmp_path)
    for offset in (36891, 36892):
        o = c.run_fault(Fault("flip", "db.data", offset, 0x01))
        assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and "kahadb-subscription-no-cursor" in o.codes, o
    # without ack positions to hold it, the broker hands it what follows its LastAck: nothing is claimed
    from amqtool.engines.kahadb.load import load_store
    from amqtool.engines.kahadb.sub_cursors import uncached

    d = load_store(detect(c.root), reconcile=False)[0]
    assert uncached(d, "1:fx.f5.t", "f5-d:sd", (4, 47110), None, ["any"]) == []


def test_a_record_length_that_walks_the_replay_over_sends_acked_later_is_latent(tmp_path):
    # campaign seed 9893 (f5-kill, 98938000021: latent judged CRITICAL): db-7.log@64116 ^0x08, the low byte of the
    # length of the send at 64113 (the batch at 64085, an older file after the checkpoint) read 442 for 434.
    # Journal.getNextLocation returns that record and MessageDatabase.load reads it as written (mergeFramed
    # ignores the 8 bytes after the framed command); the walk then reads a header 8 bytes into the next batch's
    # control record ('TE B', type 'A'), steps over it by that size past the file's end, on to db-8.log. The one
    # send it skips (fx.f5.side) is acknowledged later in the replay: the broker delivers the same. The same flip
    # in the batches around it lands on a header the walk cannot step over: the broker does not start
    from tests.faults.model import Fault

    c = KahaCampaign("f5-kill", F5 / "kahadb", tmp_path)
    for batch, truth, verdict in ((63167, LOSS, "CRITICAL"), (64085, LATENT, "WARNING"), (64547, LOSS, "CRITICAL")):
        o = c.run_fault(Fault("flip", "db-7.log", batch + 28 + 3, 0x08))
        assert (o.truth, o.verdict) == (truth, verdict) and "kahadb-checksum-mismatch" in o.codes, (batch, o)


def test_an_ack_finds_its_entry_by_the_message_id_index(tmp_path):
    # campaign seed 9893 (f12-subs-kill, 98933000005: same judged loss by the truth): db.data@80260 ^0x02, the id
    # in fx.f12.t's order-index entry of ID:...:4:-1:1:136 read IF:..., its messageIdIndex key intact. An ack
    # replayed after the checkpoint looks its id up in the messageIdIndex (updateIndex(KahaRemoveMessageCommand))
    # and takes the entry by sequence, whatever its MessageKeys id says: f12-red:red acked it, it is handed nothing
    # more. The truth matched the ack with the damaged id and kept the message pending
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    o = c.run_one(98933000005)
    assert (o.fault.path, o.fault.offset) == ("db.data", 80260)
    assert (o.truth, o.verdict) == (SAME, "WARNING") and "kahadb-index-entry-damaged" in o.codes, o


def test_a_queue_ack_whose_message_id_index_key_is_damaged_finds_nothing(tmp_path):
    # the other way round (a sweep of the order and messageIdIndex pages, seed 9883: f5-kill db.data@94390 ^0x01,
    # loss judged WARNING): fx.f5.side's messageIdIndex key of a message acked after the checkpoint reads
    # IE:... for ID:... The queue ack's replay (updateIndex(KahaRemoveMessageCommand): messageIdIndex.remove of
    # the acked id) finds no sequence and leaves the order-index entry: the acknowledged message comes back
    from tests.faults.model import Fault

    c = KahaCampaign("f5-kill", F5 / "kahadb", tmp_path)
    data = (c.root / "db.data").read_bytes()
    at = data.find(b"ID:vm-41323-1795706006529-3:2:-1:1:24", 4096 + 22 * 4096, 4096 + 23 * 4096)  # (page 22)
    assert at > 0
    o = c.run_fault(Fault("flip", "db.data", at + 1, 0x01))
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and "kahadb-ack-finds-nothing" in o.codes, o


def test_an_entry_whose_message_id_index_names_the_record_it_points_at_is_a_damaged_entry(tmp_path):
    # campaign seed 9893 (f12-subs-kill, 98933000194: same judged CRITICAL once the truth names entries by the
    # messageIdIndex): db.data@82399 ^0x08, the id of fx.f12.t's order-index entry of ID:...-3:4:-1:1:52 read
    # ID:...-;:4:-1:1:52. The record at its location holds ...-3:4:-1:1:52, which the full journal replay does not
    # hold live (acknowledged after the checkpoint), so the journal could not vouch for it; the index's own
    # messageIdIndex does: it gives the entry's sequence to the id the record holds. The broker delivers the
    # record's message (no id is compared at dispatch): a damaged entry, not an unreadable message
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    o = c.run_one(98933000194)
    assert (o.fault.path, o.fault.offset) == ("db.data", 82399)
    assert (o.truth, o.verdict) == (SAME, "WARNING") and "kahadb-index-entry-damaged" in o.codes, o


def test_a_checkpoint_moved_before_its_own_records_skips_nothing_the_index_lacks(tmp_path):
    # campaign seed 9893 (f12-subs-kill, 98933000215: same judged CRITICAL): db.data@4133 ^0x04, page 0's
    # lastUpdate file id read 2 for 6 (2:3934). checkpointUpdate writes the producer audit and ack map records
    # just before it records lastUpdate, so a lastUpdate before them (page 0 names them in db-6.log) is damaged
    # too: the records between the two were in the index already. The walk from 2:3934 reads a header inside a
    # record and steps over some of them, which changes nothing the index holds: no kahadb-replay-skips
    c = KahaCampaign("f12-subs-kill", F12 / "kahadb", tmp_path)
    o = c.run_one(98933000215)
    assert (o.fault.path, o.fault.offset, o.fault.length) == ("db.data", 4133, 0x04)
    assert (o.truth, o.verdict) == (SAME, "WARNING") and "kahadb-replay-skips" not in o.codes, o


def test_zeros_over_bytes_already_zero_before_the_newest_files_last_batch_are_that_batchs_torn_write(tmp_path):
    # a sweep of zeros over the head of each file's last batch (f11-shrink-kill, a 5.17 broker's store): 51
    # zeros from 9381 and 50 from 9382 over db-3.log (the newest file, its last batch at 9382 after the index
    # checkpoint) leave the same bytes, as the byte at 9381 is zero already. The truth took the first for a
    # loss (it starts before the last batch: no crash's) and the second for a torn write: the one damaged
    # store, two truths. It now judges a zeroed range from its first byte that was not zero.
    from tests.faults.kahadb import TORN
    from tests.faults.model import Fault
    from tests.support import REPO

    campaign = KahaCampaign("f11", REPO / "tests/data/kahadb/f11-shrink-kill/kahadb", tmp_path)
    assert (campaign.root / "db-3.log").read_bytes()[9381] == 0
    for offset in (9381, 9382):
        o = campaign.run_fault(Fault("zero", "db-3.log", offset, 9432 - offset, label="zeroed range"))
        assert (o.truth, o.verdict) == (TORN, "WARNING"), (offset, o.codes)


K2 = Path(__file__).resolve().parents[1] / "data" / "kahadb" / "k2-priority-subs-kill"


def test_a_lost_ack_of_a_message_handed_again_from_the_last_ack_changes_nothing(tmp_path):
    # campaign seed 7647 (k2-priority-subs-kill, 76470000017 and 76470000110: same judged CRITICAL): a damaged
    # batch of the newest file db-6.log, after the checkpoint, holding red2's ack of :7:-1:1:54. red2 had acked
    # it in run 1 already (the broker handed it again from red2's LastAck, last_acks.py), so the ack takes nothing
    # out of its ack positions, and red2's last ack is applied after the batch: its LastAck is the same. The
    # broker skips the corrupted block and hands the same (last_acks.handed_anyway): WARNING
    c = KahaCampaign("k2-priority-subs-kill", K2 / "kahadb", tmp_path)
    for seed, where in ((76470000017, ("db-6.log", 14268)), (76470000110, ("db-6.log", 12006))):
        o = c.run_one(seed)
        assert (o.fault.path, o.fault.offset) == where
        assert (o.truth, o.verdict) == (SAME, "WARNING") and "kahadb-checksum-mismatch" in o.codes


def test_a_queue_send_whose_framed_length_drops_its_priority_fields_is_replayed_unchanged(tmp_path):
    # campaign seed 8658 (k2-priority-subs-kill, 86581000372 and 86581000475: latent judged CRITICAL): a bit of
    # the framed length of a send to the prioritized queue fx.k2.p2 / fx.k2.p1 in db-5.log / db-4.log, older files
    # after the checkpoint 4:19532. MessageDatabase.load's mergeFramed reads that many bytes and ignores the
    # rest: the send loses its last field, prioritySupported, and is indexed at DEFAULT_PRIORITY (4) for 1 or 6.
    # A queue's priority only picks the order index band the entry is filed in: dispatch order, the same
    # messages delivered (a rebuild keeps the damaged batch out: latent)
    c = KahaCampaign("k2-priority-subs-kill", K2 / "kahadb", tmp_path)
    for seed, where in ((86581000372, ("db-5.log", 28214)), (86581000475, ("db-4.log", 28421))):
        o = c.run_one(seed)
        assert (o.fault.path, o.fault.offset, o.fault.label) == (*where, "record 1 varint")
        assert (o.truth, o.verdict) == (LATENT, "WARNING") and "kahadb-checksum-mismatch" in o.codes, (seed, o.codes)


K6 = Path(__file__).resolve().parents[1] / "data" / "kahadb" / "k6-acked-after-kill"


def test_a_killed_stores_newest_file_cut_before_its_checkpoint_s_end_is_a_loss(tmp_path):
    # kl48 sweep of cuts of the newest file before the end of the index checkpoint's own record over the
    # kahadb-fresh and hold-out stores (and campaign seeds 8668, 7668: h3-mkahadb-restarts-kill,
    # f13-mkahadb-topics-kill, "the f13 cut"): in a killed broker's store every one lost messages (the broker ran
    # on after its checkpoint), 21 of 35 were judged a torn tail (WARNING), those of single-file journals (k6's
    # db-1.log here, cut at 3305 before the checkpoint's records end at 3417) whatever the preallocation. No
    # crash cuts what the checkpoint was written after. A cleanly stopped broker's journal ends with its
    # checkpoint: the shared fixture gc cut inside it delivers the same, a WARNING still
    from tests.faults.model import Fault

    c = KahaCampaign("k6-acked-after-kill", K6 / "kahadb", tmp_path / "k6")
    o = c.run_fault(Fault("truncate", "db-1.log", 3305, 0, "", "truncated newest file"))
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and "kahadb-truncated-file" in o.codes, o.codes
    gc = KAHADB / "gc" / "kahadb"
    if gc.is_dir():
        c = KahaCampaign("gc", gc, tmp_path / "gc")
        o = c.run_fault(Fault("truncate", "db-8.log", 39000, 0, "", "truncated newest file"))
        assert (o.truth, o.verdict) == (SAME, "WARNING"), o.codes


V1 = Path(__file__).resolve().parents[1] / "data" / "kahadb" / "v1-vtopic-small"


def test_an_index_id_damaged_where_a_virtual_topic_copy_keeps_it_is_a_damaged_entry(tmp_path):
    # kl49 campaign seed 4901 (n2-vtopic-groups-kill, 49011000951: same judged CRITICAL): a db.data flip made
    # Consumer.B's order-index entry of a virtual topic message name "ID8vm-..." for "ID:vm-...". The broker
    # reads the record at the entry's location and delivers it as before. Consumer.A holds its own copy under
    # the same id (each consumer queue's ADD keeps the topic message's id), and verify took that other queue's
    # live entry for a second owner of the id: CRITICAL kahadb-unreadable-live-message. Every id byte flipped
    # in db.data of a message live on both queues: no same-truth fault is CRITICAL, and the entry's is named
    import json

    from tests.faults.model import Fault

    manifest = json.loads((V1 / "manifest.json").read_text())
    live = {k: set(v["live_fx_ids"]) for k, v in manifest["destinations"].items()}
    both = live["/queue/Consumer.A.VirtualTopic.fx.v1"] & live["/queue/Consumer.B.VirtualTopic.fx.v1"]
    mid = next(m["message_id"] for m in manifest["messages"] if m["fx_id"] in both and m["message_id"])
    data = (V1 / "kahadb" / "db.data").read_bytes()
    at = [i for i in range(len(data)) if data.startswith(mid.encode(), i)]
    assert len(at) >= 4  # two order-index entries and two messageIdIndex keys at least
    c = KahaCampaign("v1-vtopic-small", V1 / "kahadb", tmp_path)
    outcomes = [c.run_fault(Fault("flip", "db.data", off + 2, 0x02)) for off in at]  # "ID:" -> "ID8"
    assert all(o.ok for o in outcomes), [(o.fault.offset, o.truth, o.verdict, o.codes) for o in outcomes]
    assert any(o.truth == SAME and "kahadb-index-entry-damaged" in o.codes for o in outcomes)


F7 = Path(__file__).resolve().parents[1] / "data" / "kahadb" / "f7-kill-gc"
K7 = Path(__file__).resolve().parents[1] / "data" / "kahadb" / "k7-batched-nosync-kill"


def test_a_newest_file_whose_end_marker_is_gone_was_cut_or_zeroed(tmp_path):
    # kl49 sweeps of the newest file zeroed to its end and cut (seeds 4931, 4932, 17 stores: 154 and 18 misses,
    # loss read WARNING kahadb-truncated-tail). Every file a 5.17 broker writes ends with the end marker (the
    # sparse preallocation's, or the appender's after a batch that ran over it), and a crash only tears a
    # batch inside the file: zeros or a cut through those last five bytes were made after the fact, and what
    # the broker would have replayed from the torn batch on is lost. The truth called zeros from inside the
    # newest file's last batch through that marker a torn write (f7 below): no crash writes them.
    from tests.faults.model import Fault

    c = KahaCampaign("f7-kill-gc", F7 / "kahadb", tmp_path / "f7")
    o = c.run_fault(Fault("zero", "db-9.log", 4615, 32768 - 4615, label="zeroed to the end"))
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and "kahadb-truncated-file" in o.codes, o.codes
    c = KahaCampaign("k7-batched-nosync-kill", K7 / "kahadb", tmp_path / "k7")
    o = c.run_fault(Fault("zero", "db-3.log", 1681, 14703, label="zeroed to the end"))
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and "kahadb-truncated-file" in o.codes, o.codes
    # a journal of one file: the defaults preallocate it sparse, so it ends with the marker too
    c = KahaCampaign("k6-acked-after-kill", K6 / "kahadb", tmp_path / "k6")
    o = c.run_fault(Fault("truncate", "db-1.log", 3973, label="cut"))
    assert (o.truth, o.verdict) == (LOSS, "CRITICAL") and "kahadb-truncated-file" in o.codes, o.codes
