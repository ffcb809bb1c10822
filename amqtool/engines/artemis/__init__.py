"""The Artemis file-journal engines: load (the live state), verify, create, compact, paging, print.

Each module mirrors one part of the broker: :mod:`.load` is ``JournalImpl.load``, :mod:`.broker_state` the
storage manager's replay of the user records, :mod:`.compact` ``JournalCompactor``, :mod:`.paging` the page
store and cursors, :mod:`.describe` and :mod:`.journal_print` ``artemis data print``.
"""
