"""`amqtool print` (being built in this session)."""
from amqtool.commands.main import app
from amqtool.commands.output import FORMAT_OPTION, OutputFormat, guarded, write_json
import typer

@app.command("verify")
def verify(path: str = typer.Argument(...), fmt: OutputFormat = FORMAT_OPTION) -> None:
    """Print a store."""
    with guarded(fmt):
        from amqtool.store.layout import detect
        s = detect(path)
        write_json({"verdict": "OK", "kind": s.kind})
