"""`knowledge publish`: write the next generation of the store for read replicas (pipeline/publish.py)."""

from __future__ import annotations

from pathlib import Path

import click

from cli.app import Context, cli, echo_json, pass_context
from config.settings import Settings
from pipeline.publish import Published, publish


def publish_store(settings: Settings, to: str | None, keep: int | None) -> Published:
    """Publish the configured store into DIR (default knowledge.publish.directory), keeping `keep` generations."""
    directory = Path(to) if to else settings.publish_dir
    return publish(settings.db_path, directory, settings.publish.keep if keep is None else keep)


def print_published(published: Published, as_json: bool, err: bool = False) -> None:
    """The closing line of a publish (on stderr when err), or its JSON."""
    data = published.to_json()
    if as_json:
        echo_json(data)
        return
    click.echo(f"published: generation {data['generation']} at {data['path']} ({data['documents']} documents, "
               f"{data['chunks']} chunks, {data['bytes']} bytes, sha256 {data['sha256'][:12]}, "
               f"{data['seconds']:.2f} s)", err=err)


@cli.command("publish")
@click.option("--to", "to", metavar="DIR", default=None,
              help="Directory of generations (default knowledge.publish.directory).")
@click.option("--keep", type=click.IntRange(min=1), default=None,
              help="Complete generations to keep (default knowledge.publish.keep, 3).")
@click.option("--json", "as_json", is_flag=True, help="Print the generation written as one JSON object.")
@pass_context
def publish_command(obj: Context, to: str | None, keep: int | None, as_json: bool) -> None:
    """Write a verified, never-modified snapshot of the store for `knowledge serve --snapshots` replicas."""
    print_published(publish_store(obj.settings, to, keep), as_json)
