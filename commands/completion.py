"""Static shell completion for bash, zsh and fish, generated at build time from the Click command tree.

Click's own completion (``_AMQTOOL_COMPLETE=bash_source``) runs ``amqtool`` at every TAB; these scripts do
not: the subcommands, options, the values of choice options (``--format``, ``--sort``, ...) are written into
the script when the package is built (setup.py calls :func:`write_all`), and store paths complete as files and
directories by the shell itself. ``python -m amqtool.commands.completion bash|zsh|fish`` prints one.

Installed (setup.py ``data_files``) where the shells look under the install prefix:
``share/bash-completion/completions/amqtool``, ``share/zsh/site-functions/_amqtool``,
``share/fish/vendor_completions.d/amqtool.fish``.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

INSTALL_PATHS = {
    "bash": ("share/bash-completion/completions", "amqtool"),
    "zsh": ("share/zsh/site-functions", "_amqtool"),
    "fish": ("share/fish/vendor_completions.d", "amqtool.fish"),
}


@dataclass
class Option:
    names: list[str]
    takes_value: bool
    choices: list[str] | None
    help: str = ""


@dataclass
class Node:
    path: str  # "" for the root, "check", "check disk-space"
    help: str = ""
    subcommands: dict[str, str] = field(default_factory=dict)  # name -> one-line help
    options: list[Option] = field(default_factory=list)


def command_tree() -> list[Node]:
    """Every command of the CLI, depth first, from Typer's Click command. Typer vendors Click (its classes
    are not importable from ``click``), so the tree is read through Click's public attributes: a group has
    ``commands``, an option's ``param_type_name`` is "option", a choice type has ``choices``."""
    import typer

    from amqtool.commands.main import app

    nodes: list[Node] = []

    def walk(cmd, path: str) -> None:
        node = Node(path, (cmd.help or "").strip().splitlines()[0] if cmd.help else "")
        for p in cmd.params:
            if p.param_type_name == "option" and not getattr(p, "hidden", False):
                choices = getattr(p.type, "choices", None)
                choices = [getattr(c, "value", c) for c in choices] if choices else None
                takes = not (p.is_flag or p.count)
                node.options.append(Option(list(p.opts) + list(p.secondary_opts), takes, choices,
                                           (p.help or "").splitlines()[0] if p.help else ""))
        node.options.append(Option(["--help", "-h"], False, None, "Show the help and exit."))
        group = getattr(cmd, "commands", None) is not None
        if group:
            for name, sub in sorted(cmd.commands.items()):
                if getattr(sub, "hidden", False):
                    continue
                node.subcommands[name] = (sub.get_short_help_str(80) or "")
        nodes.append(node)
        if group:
            for name, sub in sorted(cmd.commands.items()):
                if not getattr(sub, "hidden", False):
                    walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return nodes


def _q(text: str) -> str:
    """Single-quoted for sh, bash, zsh and fish."""
    return "'" + text.replace("'", "'\\''") + "'"


def _lookups(nodes: list[Node], indent: str, say: str) -> str:
    """The four lookup functions the bash and the zsh script share (the same sh ``case`` syntax), indented by
    ``indent`` and answering with ``say`` (bash ``echo``, zsh ``print -r --``): the subcommands and the options
    of a command path, whether an option of a path takes a value, and the values of a choice option."""
    arm = indent * 2
    subs = "".join(f"{arm}{_q(n.path)}) {say} {_q(' '.join(n.subcommands))} ;;\n" for n in nodes if n.subcommands)
    opts = "".join(f"{arm}{_q(n.path)}) {say} {_q(' '.join(x for o in n.options for x in o.names))} ;;\n"
                   for n in nodes)
    valued, choices = [], []
    for n in nodes:
        for o in n.options:
            if not o.takes_value:
                continue
            keys = "|".join(_q(f"{n.path}|{name}") for name in o.names)
            valued.append(f"{arm}{keys}) return 0 ;;\n")
            if o.choices:
                choices.append(f"{arm}{keys}) {say} {_q(' '.join(o.choices))} ;;\n")
    return f"""_amqtool_subcommands() {{
{indent}case "$1" in
{subs}{indent}esac
}}
_amqtool_options() {{
{indent}case "$1" in
{opts}{indent}esac
}}
_amqtool_takes_value() {{
{indent}case "$1|$2" in
{''.join(valued)}{indent}esac
{indent}return 1
}}
_amqtool_choices() {{
{indent}case "$1|$2" in
{''.join(choices)}{indent}esac
}}"""


def bash_script(nodes: list[Node]) -> str:
    return f"""# bash completion for amqtool: generated at build time by amqtool.commands.completion; no amqtool
# process runs at TAB. Enable: source this file (installed as share/bash-completion/completions/amqtool,
# which bash-completion loads by itself).
{_lookups(nodes, "    ", "echo")}
_amqtool() {{
    local cur prev path="" w i subs skip=0
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev=""
    [ "$COMP_CWORD" -gt 0 ] && prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${{COMP_WORDS[i]}}"
        if [ "$skip" = 1 ]; then skip=0; continue; fi
        case "$w" in
            -*=*) continue ;;
            -*) _amqtool_takes_value "$path" "$w" && skip=1; continue ;;
        esac
        subs=" $(_amqtool_subcommands "$path") "
        case "$subs" in *" $w "*) path="${{path:+$path }}$w" ;; esac
    done
    if [ "$COMP_CWORD" -gt 1 ] && _amqtool_takes_value "$path" "$prev"; then
        local values
        values="$(_amqtool_choices "$path" "$prev")"
        if [ -n "$values" ]; then
            COMPREPLY=($(compgen -W "$values" -- "$cur"))
        else
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -- "$cur"))
        fi
        return 0
    fi
    case "$cur" in
        -*) COMPREPLY=($(compgen -W "$(_amqtool_options "$path")" -- "$cur")); return 0 ;;
    esac
    subs="$(_amqtool_subcommands "$path")"
    if [ -n "$subs" ]; then
        COMPREPLY=($(compgen -W "$subs" -- "$cur"))
    else
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
    return 0
}}
complete -F _amqtool amqtool
"""


def zsh_script(nodes: list[Node]) -> str:
    return f"""#compdef amqtool
# zsh completion for amqtool: generated at build time by amqtool.commands.completion; no amqtool process
# runs at TAB. Installed as share/zsh/site-functions/_amqtool (on zsh's $fpath), or: fpath+=(DIR); compinit.
{_lookups(nodes, "  ", "print -r --")}
_amqtool() {{
  local path="" w i skip=0 values
  local -a subs
  for (( i = 2; i < CURRENT; i++ )); do
    w="${{words[i]}}"
    if (( skip )); then skip=0; continue; fi
    case "$w" in
      -*=*) continue ;;
      -*) _amqtool_takes_value "$path" "$w" && skip=1; continue ;;
    esac
    subs=(${{=$(_amqtool_subcommands "$path")}})
    if (( ${{subs[(Ie)$w]}} )); then path="${{path:+$path }}$w"; fi
  done
  if (( CURRENT > 2 )) && _amqtool_takes_value "$path" "${{words[CURRENT-1]}}"; then
    values="$(_amqtool_choices "$path" "${{words[CURRENT-1]}}")"
    if [[ -n "$values" ]]; then compadd -- ${{=values}}; else _files; fi
    return
  fi
  if [[ "${{words[CURRENT]}}" == -* ]]; then
    compadd -- ${{=$(_amqtool_options "$path")}}
    return
  fi
  values="$(_amqtool_subcommands "$path")"
  if [[ -n "$values" ]]; then compadd -- ${{=values}}; else _files; fi
}}
_amqtool "$@"
"""


def fish_script(nodes: list[Node]) -> str:
    lines = ["# fish completion for amqtool: generated at build time by amqtool.commands.completion; no amqtool",
             "# process runs at TAB. Installed as share/fish/vendor_completions.d/amqtool.fish.",
             "complete -c amqtool -f"]
    by_path = {n.path: n for n in nodes}

    def condition(path: str) -> str:
        if not path:
            return "__fish_use_subcommand"
        parts = path.split()
        cond = " ; and ".join(f"__fish_seen_subcommand_from {p}" for p in parts)
        node = by_path[path]
        if node.subcommands:
            cond += f" ; and not __fish_seen_subcommand_from {' '.join(node.subcommands)}"
        return cond

    for n in nodes:
        cond = _q(condition(n.path))
        for name, help_ in n.subcommands.items():
            lines.append(f"complete -c amqtool -n {cond} -a {_q(name)} -d {_q(help_)}")
        for o in n.options:
            flags = []
            for name in o.names:
                if name.startswith("--"):
                    flags.append(f"-l {_q(name[2:])}")
                elif name.startswith("-") and len(name) == 2:
                    flags.append(f"-s {_q(name[1:])}")
            if not flags:
                continue
            value = ""
            if o.takes_value:
                value = f" -x -a {_q(' '.join(o.choices))}" if o.choices else " -r -F"
            lines.append(f"complete -c amqtool -n {cond} {' '.join(flags)}{value} -d {_q(o.help)}")
        if not n.subcommands and n.path:  # leaf commands take store paths
            lines.append(f"complete -c amqtool -n {cond} -F")
    return "\n".join(lines) + "\n"


GENERATORS = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}


def write_all(directory: str | Path) -> dict[str, Path]:
    """Write the three scripts into ``directory`` (named as installed); returns {shell: path}."""
    nodes = command_tree()
    out = {}
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for shell, gen in GENERATORS.items():
        p = d / INSTALL_PATHS[shell][1]
        p.write_text(gen(nodes))
        out[shell] = p
    return out


if __name__ == "__main__":  # pragma: no cover
    if len(sys.argv) != 2 or sys.argv[1] not in GENERATORS:
        sys.stderr.write("usage: python -m amqtool.commands.completion bash|zsh|fish\n")
        sys.exit(3)
    sys.stdout.write(GENERATORS[sys.argv[1]](command_tree()))
