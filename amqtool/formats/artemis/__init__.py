"""Pure codecs for the Artemis file journal, its broker records, page files and control files."""
