"""The `infercost` command: server parts, the all-in-one launcher, the simulator, and the
client commands that use the HTTP API (endpoints, hardware, prices, datasets, traffic, imports,
jobs, runs, compare, estimate, report, bench, schedules; submit and cancel as shortcuts).

Each command's module is imported when the command runs (or lists its help), so a client
command never pays for the launcher's database layer or the simulator."""

from __future__ import annotations

import importlib

import click

#: Command name -> "module:attribute" of its click command.
COMMANDS = {
    "api": "cli.serve:api",
    "worker": "cli.serve:worker",
    "maintenance": "cli.serve:maintenance",
    "migrate": "cli.serve:migrate",
    "scrub": "cli.serve:scrub",
    "sim": "cli.sim:sim",
    "up": "cli.up:up",
    "submit": "cli.commands:submit",
    "jobs": "cli.commands:jobs",
    "compare": "cli.commands:compare",
    "report": "cli.commands:report",
    "cancel": "cli.commands:cancel",
    "endpoints": "cli.resources:endpoints",
    "prices": "cli.resources:prices",
    "hardware": "cli.hardware:hardware",
    "datasets": "cli.resources:datasets",
    "traffic": "cli.traffic:traffic",
    "imports": "cli.imports:imports",
    "runs": "cli.resources:runs",
    "estimate": "cli.resources:estimate",
    "bench": "cli.bench:bench",
    "export": "cli.export:export",
    "schedules": "cli.schedules:schedules",
    "teams": "cli.admin:teams",
    "keys": "cli.admin:keys",
    "audit": "cli.admin:audit",
}


class _LazyGroup(click.Group):
    """A group whose commands are imported by name when first used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attribute = target.split(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="infercost")
def main() -> None:
    """infercost: how fast is this LLM deployment, and what does each token cost."""
