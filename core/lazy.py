"""A click group whose subcommands are imported only when invoked.

``gpuready --help`` lists commands from this table alone, so it never imports the
heavy libraries (Ansible, kubernetes, pyvmomi, TensorFlow) the commands use.
"""

from __future__ import annotations

import difflib
import importlib

import click


class LazyGroup(click.Group):
    def __init__(self, *args: object, lazy: dict[str, tuple[str, str]] | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        #: name -> ("module:attribute", short help)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:
            target, _ = self.lazy[name]
            module, attribute = target.split(":")
            command: click.Command = getattr(importlib.import_module(module), attribute)
            return command
        return super().get_command(ctx, name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click's, with the closest command named when the one typed does not exist (as click does for
        options)."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1)
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {close[0]!r}?")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, self.lazy[name][1]) for name in sorted(self.lazy)]
        rows += [(name, cmd.get_short_help_str(limit=80)) for name, cmd in sorted(self.commands.items())]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
