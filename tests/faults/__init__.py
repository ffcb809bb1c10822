"""The fault-injection harness: damage copies of real stores, compute what the broker would deliver from the
damaged copy with the loaders the fixtures prove equal to the brokers', and hold every judging command's
verdict to the rule of issue 25 (man/amqtool-verify.1, "VERDICTS").

``model``: faults and their undo, truth classes, the expected verdict of each class, the confusion table.
``artemis``: fault sites biased to the file journal's and the page files' structure, and the delivered state.
``jdbc``: row faults on both brokers' database stores in a throwaway PostgreSQL, each in a savepoint, and their
truth (with ``unproven``: a loss no row can prove, the damaged tables being a state the broker writes itself).
``runner``: runs a campaign (a fixed seed in ``make test``, ``bench/fuzz_verdicts.py`` for ``make fuzz``).
"""
