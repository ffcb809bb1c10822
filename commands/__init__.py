"""Command-line modules: one per subcommand; the only place typer and rich are imported."""
