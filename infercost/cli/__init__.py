"""The `infercost` command: server parts, the all-in-one launcher, the simulator, and the
client commands that use the HTTP API (endpoints, prices, datasets, jobs, runs, compare,
estimate, report, bench, schedules; submit and cancel as shortcuts)."""

from __future__ import annotations

import click

from infercost.cli.bench import bench
from infercost.cli.commands import cancel, compare, jobs, report, submit
from infercost.cli.export import export
from infercost.cli.resources import datasets, endpoints, estimate, prices, runs
from infercost.cli.schedules import schedules
from infercost.cli.serve import api, maintenance, migrate, worker
from infercost.cli.sim import sim
from infercost.cli.up import up


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="infercost")
def main() -> None:
    """infercost: how fast is this LLM deployment, and what does each token cost."""


main.add_command(api)
main.add_command(worker)
main.add_command(maintenance)
main.add_command(migrate)
main.add_command(sim)
main.add_command(up)
main.add_command(submit)
main.add_command(jobs)
main.add_command(compare)
main.add_command(report)
main.add_command(cancel)
main.add_command(endpoints)
main.add_command(prices)
main.add_command(datasets)
main.add_command(runs)
main.add_command(estimate)
main.add_command(bench)
main.add_command(export)
main.add_command(schedules)
